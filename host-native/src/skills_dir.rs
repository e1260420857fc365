//! Finding SKILL.md files under folders.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use toolnexus_core::skills::SkillSet;
use walkdir::WalkDir;

/// A skills folder that is not there (or is not a folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingSkillDir {
    pub dir: PathBuf,
}

impl std::fmt::Display for MissingSkillDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the skills folder {} does not exist", self.dir.display())
    }
}

impl std::error::Error for MissingSkillDir {}

/// Loads every `**/SKILL.md` under `dirs`, in sorted path order, following
/// symlinks (a folder reached twice is read once, so link cycles end).
/// A missing folder is an error; a malformed SKILL.md is skipped with a reason.
pub fn load_skill_dirs(dirs: &[PathBuf]) -> Result<SkillSet, MissingSkillDir> {
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    for dir in dirs {
        if !dir.is_dir() {
            return Err(MissingSkillDir { dir: dir.clone() });
        }
        // Absolute, as the `skill` tool's base directory (`file:///…`) must be.
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        walk(&dir, &mut seen, &mut files);
    }
    let mut set = SkillSet::from_files(files);
    set.sample_files(|dir| sample_files(Path::new(dir), toolnexus_core::skills::SAMPLED_FILES));
    Ok(set)
}

/// Up to `limit` files under `dir` other than SKILL.md, as every toolnexus
/// port samples them: the folder's own files first, then its subfolders
/// depth first (the last one first), links followed once, `node_modules`
/// and `.git` skipped. Entries are taken in name order, so the list is
/// the same on every run.
fn sample_files(dir: &Path, limit: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    WalkDir::new(dir)
        .follow_links(true)
        // A folder's files (by name), then its folders (the last one first).
        .sort_by(|a, b| {
            let (a_dir, b_dir) = (a.file_type().is_dir(), b.file_type().is_dir());
            match (a_dir, b_dir) {
                (false, false) => a.file_name().cmp(b.file_name()),
                (true, true) => b.file_name().cmp(a.file_name()),
                _ => a_dir.cmp(&b_dir),
            }
        })
        .into_iter()
        .filter_entry(|e| {
            !e.file_type().is_dir()
                || e.depth() == 0
                || (e.file_name() != "node_modules"
                    && e.file_name() != ".git"
                    && once(&mut seen, e.path()))
        })
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name() != "SKILL.md")
        .take(limit)
        .map(|e| e.path().display().to_string())
        .collect()
}

/// Whether the folder `path` (symlinks resolved) is seen for the first time.
fn once(seen: &mut HashSet<PathBuf>, path: &Path) -> bool {
    path.canonicalize().is_ok_and(|real| seen.insert(real))
}

/// Every `SKILL.md` under `dir` in sorted path order, symlinks followed, each
/// folder (by its real path) read once across all the walked dirs.
fn walk(dir: &Path, seen: &mut HashSet<PathBuf>, files: &mut Vec<(String, String)>) {
    let found = WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !e.file_type().is_dir() || once(seen, e.path()))
        // Unreadable entries, broken links and link loops are left out.
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name() == "SKILL.md");
    for entry in found {
        let shown = entry.path().display().to_string();
        match std::fs::read(entry.path()).map(String::from_utf8) {
            Ok(Ok(text)) => files.push((shown, text)),
            // Pass something unparsable so the set records it as skipped with this path.
            Ok(Err(_)) => files.push((shown, String::from("(not UTF-8 text)"))),
            Err(_) => {}
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn follows_symlinks_once_and_ends_on_a_cycle() {
        let root = std::env::temp_dir().join(format!("toolnexus-skills-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        write(
            &root.join("a/greet/SKILL.md"),
            "---\nname: greet\ndescription: says hi\n---\nSay hi.",
        );
        write(&root.join("a/broken/SKILL.md"), "no frontmatter here");
        write(
            &root.join("elsewhere/sum/SKILL.md"),
            "---\nname: sum\n---\nAdd.",
        );
        // a/linked -> elsewhere (followed), a/loop -> a (a cycle).
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("a/linked")).expect("symlink");
        std::os::unix::fs::symlink(root.join("a"), root.join("a/loop")).expect("symlink");
        let set = load_skill_dirs(&[root.join("a")]).expect("loads");
        let mut names: Vec<&str> = set.skills().iter().map(|s| s.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["greet", "sum"]);
        assert_eq!(
            set.skipped().len(),
            1,
            "the malformed one is skipped with a reason"
        );
        assert!(set.skipped()[0].path.ends_with("broken/SKILL.md"));
        assert!(load_skill_dirs(&[root.join("missing")]).is_err());
        let _ = std::fs::remove_dir_all(&root);
    }
}

#[cfg(all(test, unix))]
mod sample_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_skill_tool_shows_the_absolute_folder_and_its_sampled_files() {
        let root = std::env::temp_dir().join(format!("toolnexus-sample-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let skill = root.join("pdf");
        for (path, text) in [
            (
                "SKILL.md",
                "---\nname: pdf\ndescription: PDFs\n---\nUse scripts/run.sh.",
            ),
            ("ref.md", "r"),
            ("scripts/run.sh", "#!/bin/sh"),
            ("node_modules/x/index.js", "x"),
            (".git/HEAD", "h"),
        ] {
            let p = skill.join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
        for i in 0..12 {
            std::fs::write(skill.join(format!("z{i:02}.txt")), "z").expect("write");
        }
        let set = load_skill_dirs(std::slice::from_ref(&root)).expect("loads");
        let out = set.run_tool(&json!({"name": "pdf"})).output;
        let dir = skill.display().to_string();
        assert!(
            out.contains(&format!("Base directory for this skill: file://{dir}\n")),
            "{out}"
        );
        let files: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("<file>")?.strip_suffix("</file>"))
            .collect();
        // The folder's own files first, in name order, capped at 10; never SKILL.md.
        let mut want = vec![format!("{dir}/ref.md")];
        want.extend((0..9).map(|i| format!("{dir}/z{i:02}.txt")));
        assert_eq!(files, want);
        let _ = std::fs::remove_dir_all(&root);
    }
}
