#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub not: bool,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    reqs: Vec<FieldRequirement>,
}

impl FieldSelector {
    pub fn parse(_s: &str) -> Result<Self, super::SelectorError> {
        Ok(Self::default())
    }
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.reqs
    }
    pub fn matches(&self, _get: impl Fn(&str) -> Option<String>) -> bool {
        true
    }
}
