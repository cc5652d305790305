//! The import graph points one way (DESIGN §7): the core — the view, counting, pairing, the
//! plan, the request and the JSON helpers — names no provider and none of the layers that
//! dispatch to providers (`native`, `body`, `native_body`, `readings`); the providers depend
//! on the core's types, never on the body path or the request's internals. Checked over the
//! `crate::` paths of every source file, test code left out.

use std::path::{Path, PathBuf};

/// Modules of the core, as paths under `rust/src` (a folder stands for every file in it).
const CORE: [&str; 14] = [
    "view.rs",
    "identifiers.rs",
    "units.rs",
    "ledger.rs",
    "summary.rs",
    "rewrite.rs",
    "cache.rs",
    "request.rs",
    "error.rs",
    "json_array.rs",
    "json",
    "plan",
    "count",
    "pairing",
];
/// What the core may not name.
const ABOVE_CORE: [&str; 6] = [
    "providers::",
    "crate::translate",
    "crate::native",
    "crate::body",
    "crate::readings",
    "crate::py",
];
/// What a provider may not name.
const ABOVE_PROVIDERS: [&str; 6] = [
    "crate::translate",
    "crate::body",
    "crate::native",
    "crate::request",
    "crate::readings",
    "crate::py",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rust/src")
}

/// The `.rs` files at `path` (the file itself, or every file below the folder), test files
/// left out.
fn files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).expect("a source folder") {
        let p = entry.expect("a folder entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            out.extend(files(&p));
        } else if name.ends_with(".rs") && !name.ends_with("tests.rs") {
            out.push(p);
        }
    }
    out
}

/// The lines of `file` before its test module that name one of `forbidden`.
fn offences(file: &Path, forbidden: &[&str]) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("a source file");
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    code.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| forbidden.iter().any(|f| line.contains(f)))
        .map(|(n, line)| format!("{}:{}: {}", file.display(), n + 1, line.trim()))
        .collect()
}

#[test]
fn the_core_names_no_provider_and_no_layer_above_it() {
    let found: Vec<String> = CORE
        .iter()
        .flat_map(|m| files(&src().join(m)))
        .flat_map(|f| offences(&f, &ABOVE_CORE))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn providers_depend_on_the_core_alone() {
    let found: Vec<String> = files(&src().join("providers"))
        .iter()
        .flat_map(|f| offences(f, &ABOVE_PROVIDERS))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_finds_what_it_forbids() {
    let dir = std::env::temp_dir().join(format!("ringbound-layering-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plan.rs");
    std::fs::write(
        &file,
        "use crate::providers::gemini;\n// crate::body in a comment\n#[cfg(test)]\nmod tests {\n    use crate::body;\n}\n",
    )
    .unwrap();
    let found = offences(&file, &ABOVE_CORE);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with("use crate::providers::gemini;"));
}
