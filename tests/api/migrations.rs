use std::collections::BTreeSet;
use std::path::Path;

fn names(tree: &str) -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(tree);
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn both_backends_have_the_same_migrations() {
    let sqlite = names("sqlite");
    let postgres = names("postgres");
    assert!(!sqlite.is_empty());
    assert_eq!(
        sqlite, postgres,
        "migrations/sqlite and migrations/postgres must hold the same names"
    );
    for tree in ["sqlite", "postgres"] {
        for name in &sqlite {
            for file in ["up.sql", "down.sql"] {
                let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("migrations")
                    .join(tree)
                    .join(name)
                    .join(file);
                assert!(path.is_file(), "{} is missing", path.display());
            }
        }
    }
}
