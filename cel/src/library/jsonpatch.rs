//! Kubernetes' JSON Patch library: `jsonpatch.escapeKey(<string>)` escapes
//! a key for use in a JSON Pointer path (`~` as `~0`, `/` as `~1`).

use cel::common::types::STRING_TYPE;
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::native::{native, string};

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "jsonpatch.escapeKey",
        "jsonpatch_escape_key",
        vec![STRING_TYPE],
        native!(escape_key),
    )
}

fn escape_key(args: &[Value]) -> Result<Value, ExecutionError> {
    let key = string("jsonpatch.escapeKey", &args[0])?;
    Ok(Value::String(
        key.replace('~', "~0").replace('/', "~1").into(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::assert_true;

    #[test]
    fn escapes() {
        assert_true(&[
            "jsonpatch.escapeKey('k8s.io/my~label') == 'k8s.io~1my~0label'",
            "jsonpatch.escapeKey('plain') == 'plain'",
            "'/metadata/labels/' + jsonpatch.escapeKey('a/b') == '/metadata/labels/a~1b'",
        ]);
    }
}
