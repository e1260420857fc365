//! Finding SKILL.md files under folders.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use toolnexus_core::skills::SkillSet;

/// Loads every `**/SKILL.md` under `dirs`, in sorted path order, following
/// symlinks (a folder reached twice is read once, so link cycles end).
/// A missing folder is an error; a malformed SKILL.md is skipped with a reason.
pub fn load_skill_dirs(dirs: &[PathBuf]) -> Result<SkillSet, String> {
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    for dir in dirs {
        if !dir.is_dir() {
            return Err(format!(
                "the skills folder {} does not exist",
                dir.display()
            ));
        }
        walk(dir, &mut seen, &mut files);
    }
    Ok(SkillSet::from_files(files))
}

fn walk(dir: &Path, seen: &mut HashSet<PathBuf>, files: &mut Vec<(String, String)>) {
    let Ok(real) = dir.canonicalize() else { return };
    if !seen.insert(real) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        // `metadata` follows symlinks.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(&path, seen, files);
        } else if path.file_name().is_some_and(|n| n == "SKILL.md") {
            let shown = path.display().to_string();
            match std::fs::read(&path).map(String::from_utf8) {
                Ok(Ok(text)) => files.push((shown, text)),
                // Pass something unparsable so the set records it as skipped with this path.
                Ok(Err(_)) => files.push((shown, String::from("(not UTF-8 text)"))),
                Err(_) => {}
            }
        }
    }
}
