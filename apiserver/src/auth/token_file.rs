//! `--token-auth-file`: static bearer tokens, one CSV record each,
//! `token,user,uid,"group1,group2"` (kube-apiserver's format; the groups
//! column is optional, further columns are ignored).

use super::{bearer_token, Authentication, Authenticator};
use apimachinery::auth::UserInfo;
use async_trait::async_trait;
use axum::http::request::Parts;
use std::collections::HashMap;

/// The parsed token file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

/// Splits one CSV line into fields (RFC 4180 quoting, leading spaces of
/// a field trimmed as Go's `TrimLeadingSpace`).
fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("unterminated quoted field".into()),
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(c) => return Err(format!("unexpected {c:?} after a quoted field")),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => break,
                    Some('"') => return Err("bare \" in a non-quoted field".into()),
                    Some(c) => field.push(c),
                }
            }
            fields.push(field);
        }
    }
}

impl TokenFile {
    /// Parses the file's text. Blank lines are skipped; a record needs at
    /// least token, user and uid, and a non-empty token.
    pub fn parse(text: &str) -> Result<TokenFile, String> {
        let mut users = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let at = |why: String| format!("line {}: {why}", n + 1);
            let fields = csv_fields(line).map_err(at)?;
            if fields.len() < 3 {
                return Err(at(format!(
                    "want at least 3 columns (token,user,uid), got {}",
                    fields.len()
                )));
            }
            if fields[0].is_empty() {
                return Err(at("empty token".into()));
            }
            let groups = match fields.get(3) {
                Some(g) if !g.is_empty() => g.split(',').map(str::to_string).collect(),
                _ => Vec::new(),
            };
            let user = UserInfo {
                username: fields[1].clone(),
                uid: fields[2].clone(),
                groups,
                ..Default::default()
            };
            if users.insert(fields[0].clone(), user).is_some() {
                tracing::warn!(
                    line = n + 1,
                    "duplicate token in the token file; the last wins"
                );
            }
        }
        Ok(TokenFile { users })
    }

    pub fn load(path: &std::path::Path) -> Result<TokenFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn lookup(&self, token: &str) -> Option<&UserInfo> {
        self.users.get(token)
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

#[async_trait]
impl Authenticator for TokenFile {
    async fn authenticate(&self, request: &Parts) -> Authentication {
        let Some(token) = bearer_token(request) else {
            return Authentication::NoCredentials;
        };
        match self.lookup(token) {
            Some(u) => Authentication::User(u.clone()),
            // Another token authenticator (service accounts) may know it.
            None => Authentication::Invalid("unknown bearer token".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn records() {
        let f = TokenFile::parse(
            "t1,alice,1,\"dev,ops\"\n\n t2, bob ,2\r\nt3,carol,3,single,extra\n\"t,4\",dave,4,\"\"\n",
        )
        .unwrap();
        let a = f.lookup("t1").unwrap();
        assert_eq!(
            (a.username.as_str(), a.uid.as_str(), a.groups.clone()),
            ("alice", "1", vec!["dev".to_string(), "ops".to_string()])
        );
        assert_eq!(f.lookup("t2").unwrap().username, "bob ");
        assert!(f.lookup("t2").unwrap().groups.is_empty());
        assert_eq!(f.lookup("t3").unwrap().groups, vec!["single".to_string()]);
        assert_eq!(f.lookup("t,4").unwrap().username, "dave");
        assert_eq!(f.len(), 4);
        assert!(TokenFile::parse("only,two").is_err());
        assert!(TokenFile::parse(",user,uid").is_err());
        assert!(TokenFile::parse("\"open,user,uid").is_err());
    }

    fn field() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9:._ ,\"-]{0,12}"
    }

    fn quote(s: &str) -> String {
        format!("\"{}\"", s.replace('"', "\"\""))
    }

    proptest! {
        #[test]
        fn garbage_never_panics(text in "[a-z,\"\n\r \t]{0,80}") {
            let _ = TokenFile::parse(&text);
        }

        #[test]
        fn quoted_records_round_trip(token in "[a-zA-Z0-9,\"]{1,12}", user in field(), uid in field(),
                                     groups in proptest::collection::vec("[a-z:]{1,8}", 0..4)) {
            let line = format!("{},{},{},{}", quote(&token), quote(&user), quote(&uid), quote(&groups.join(",")));
            let f = TokenFile::parse(&line).unwrap();
            let u = f.lookup(&token).unwrap();
            prop_assert_eq!(&u.username, &user);
            prop_assert_eq!(&u.uid, &uid);
            prop_assert_eq!(&u.groups, &groups);
        }
    }
}
