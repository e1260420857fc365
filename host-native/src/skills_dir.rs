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
