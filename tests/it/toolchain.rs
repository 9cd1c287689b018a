//! The compiler settings of `.cargo/config.toml` keep rustc 1.95's MIR GVN miscompile
//! (rust-lang/rust#158830) out of our builds: a release build of the smallest program that
//! triggers it (two `BTreeMap::new()` temporaries passed by value to one closure, as
//! `TopicConfig::json_schema` does) must run without a double free. Without the settings the
//! program aborts on this machine's toolchain.

use std::path::Path;
use std::process::Command;

const TRIGGER: &str = r#"
use std::collections::BTreeMap;

#[derive(Debug)]
enum V {
    S(String),
    A(Vec<V>),
    O(BTreeMap<String, V>),
}

fn schema(nullable: bool) -> V {
    let typed = |kind: &str, mut schema: BTreeMap<String, V>| {
        let kinds = if nullable {
            V::A(vec![V::S(kind.to_string()), V::S("null".into())])
        } else {
            V::S(kind.to_string())
        };
        schema.insert("type".into(), kinds);
        V::O(schema)
    };
    let mut properties = BTreeMap::new();
    properties.insert("a".to_string(), typed("boolean", BTreeMap::new()));
    properties.insert("b".to_string(), typed("boolean", BTreeMap::new()));
    V::O(properties)
}

fn main() {
    println!("{:?}", (schema(false), schema(true)));
}
"#;

#[test]
fn release_builds_with_the_workspace_settings_do_not_double_free() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"gvn-trigger\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("src/main.rs"), TRIGGER).unwrap();
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cargo/config.toml");
    assert!(config.exists(), "{}", config.display());
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["run", "--quiet", "--release", "--offline", "--config"])
        .arg(&config)
        .current_dir(dir.path())
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_BOOTSTRAP")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the trigger program failed ({}): {}{}",
        output.status,
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.matches("boolean").count(), 4, "{stdout}");
}
