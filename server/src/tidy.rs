//! The layering and style rules a tool can check, as tests over the source tree (TigerBeetle's
//! `tidy`): the engine (`log/`) imports nothing above it, the broker knows no transport, the
//! engine's modules import each other without a circle, and functions in the engine and the
//! broker stay short enough to read in one screen. Only production code counts: a file's
//! `#[cfg(test)]` tail and `*tests.rs` files may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest function (lines from `fn` to its closing brace) in `log/` and `broker/`.
const FUNCTION_LINES_MAX: usize = 70;

/// Functions that were longer than [`FUNCTION_LINES_MAX`] when the rule arrived, with the
/// length they may not exceed: the list may only shrink, and an entry's number only fall.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[
    ("log/segment.rs", "locate", 91),
    ("log/recovery.rs", "recover", 86),
    ("log/batch.rs", "parse_record", 86),
    ("log/recovery.rs", "load_trusted", 83),
    ("log/compaction/rewrite.rs", "write_group", 80),
];

fn source_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir` (relative to `src/`), with its production code: comments
/// removed, the `#[cfg(test)]` tail cut, test-only files left out.
fn production_sources(dir: &str) -> Vec<(String, String)> {
    let root = source_root();
    let mut out = Vec::new();
    let mut pending = vec![root.join(dir)];
    while let Some(path) = pending.pop() {
        let entries = std::fs::read_dir(&path).expect("source directory is readable");
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let name = path.to_string_lossy().to_string();
            if !name.ends_with(".rs") || name.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source file is readable");
            let relative = path
                .strip_prefix(&root)
                .expect("under src")
                .to_string_lossy()
                .to_string();
            out.push((relative, production_code(&text)));
        }
    }
    out.sort();
    out
}

/// `text` without its `#[cfg(test)]` tail and without `//` comments.
fn production_code(text: &str) -> String {
    let end = text.find("\n#[cfg(test)]").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The places in `sources` that mention any of `forbidden`.
fn mentions(sources: &[(String, String)], forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (file, code) in sources {
        for (number, line) in code.lines().enumerate() {
            for word in forbidden {
                if line.contains(word) {
                    found.push(format!("{file}:{}: {word}", number + 1));
                }
            }
        }
    }
    found
}

#[test]
fn the_engine_imports_nothing_above_it() {
    let sources = production_sources("log");
    assert!(sources.len() > 10, "found the engine's files");
    let above = [
        "crate::broker",
        "crate::http",
        "crate::tiering",
        "crate::topics",
        "crate::groups",
        "crate::server",
        "axum",
        "strata_openapi",
        "strata_tiering",
    ];
    assert_eq!(mentions(&sources, &above), Vec::<String>::new());
}

#[test]
fn the_broker_knows_no_transport() {
    let sources = production_sources("broker");
    assert!(sources.len() > 3, "found the broker's files");
    let transport = ["axum", "crate::http", "hyper", "tower", "strata_openapi"];
    assert_eq!(mentions(&sources, &transport), Vec::<String>::new());
}

/// The engine's modules (a directory counts as one) and the modules each imports.
fn engine_imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, code) in production_sources("log") {
        let inside = file.trim_start_matches("log/");
        let module = inside
            .split('/')
            .next()
            .unwrap_or(inside)
            .trim_end_matches(".rs")
            .to_string();
        if module == "mod" {
            continue;
        }
        // In a directory module's children, `super::` is the directory module itself.
        let nested = inside.contains('/') && !inside.ends_with("/mod.rs");
        let mut imports = BTreeSet::new();
        for prefix in ["crate::log::", "super::"] {
            if nested && prefix == "super::" {
                continue;
            }
            for (at, _) in code.match_indices(prefix) {
                let name: String = code[at + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    imports.insert(name);
                }
            }
        }
        graph.entry(module).or_default().extend(imports);
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for imports in graph.values_mut() {
        imports.retain(|name| modules.contains(name));
    }
    graph
}

/// A circle in `graph`, if there is one, as the modules along it.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut circle = path[start..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_engine_modules_import_each_other_without_a_circle() {
    let graph = engine_imports();
    assert!(
        graph.get("partition").is_some_and(|i| i.contains("writer")),
        "the scan sees real imports: {graph:?}"
    );
    assert_eq!(find_circle(&graph), None);
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    let circle = find_circle(&graph).expect("a -> b -> c -> a");
    assert_eq!(circle, ["a", "b", "c", "a"]);
}

/// Each function in `code` with its length in lines, from its `fn` line to the closing brace
/// at the same indentation.
fn function_lengths(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = ["pub(crate) ", "pub ", "async ", "const "]
            .iter()
            .fold(trimmed, |rest, prefix| {
                rest.strip_prefix(prefix).unwrap_or(rest)
            });
        let signature = signature.strip_prefix("async ").unwrap_or(signature);
        if let Some(rest) = signature.strip_prefix("fn ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let closing = format!("{indent}}}");
            let end = (index + 1..lines.len()).find(|&i| lines[i] == closing);
            if let Some(end) = end {
                out.push((name, end - index + 1));
                index = end;
            }
        }
        index += 1;
    }
    out
}

#[test]
fn functions_in_the_engine_and_the_broker_fit_one_screen() {
    let mut too_long = Vec::new();
    let mut seen_exceptions = BTreeSet::new();
    for dir in ["log", "broker"] {
        for (file, code) in production_sources(dir) {
            for (name, lines) in function_lengths(&code) {
                let allowed = LONG_FUNCTIONS
                    .iter()
                    .find(|(f, n, _)| *f == file && *n == name)
                    .map_or(FUNCTION_LINES_MAX, |(_, _, max)| *max);
                if lines > FUNCTION_LINES_MAX {
                    seen_exceptions.insert((file.clone(), name.clone()));
                }
                if lines > allowed {
                    too_long.push(format!(
                        "{file}: fn {name} has {lines} lines (max {allowed})"
                    ));
                }
            }
        }
    }
    assert_eq!(too_long, Vec::<String>::new());
    let stale: Vec<_> = LONG_FUNCTIONS
        .iter()
        .filter(|(f, n, _)| !seen_exceptions.contains(&(f.to_string(), n.to_string())))
        .collect();
    assert!(
        stale.is_empty(),
        "now short enough, drop from LONG_FUNCTIONS: {stale:?}"
    );
}

#[test]
fn function_lengths_count_from_fn_to_the_closing_brace() {
    let code = "fn a() {\n    x();\n}\n\nimpl T {\n    pub async fn b(\n        y: u8,\n    ) {\n        \
                z();\n    }\n}\n";
    assert_eq!(
        function_lengths(code),
        [("a".to_string(), 3), ("b".to_string(), 5)]
    );
}
