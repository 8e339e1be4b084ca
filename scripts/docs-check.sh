#!/usr/bin/env bash
# Checks the user guide (docs/, an mdBook) and the README's links into it:
#
#   1. mdbook, pinned to MDBOOK_VERSION, is installed if missing (`cargo install --locked
#      --no-default-features --features search`: `build` and `test` need neither `serve` nor
#      `watch`; `search` gives the built book its search box);
#   2. every relative link in README.md and docs/src/*.md names a file that exists, and every
#      `#anchor` a heading of that page; no link or path points outside the repository; every
#      code block names its language (an unnamed one is Rust to rustdoc); every page is a
#      doctest of src/lib.rs (so `cargo test --workspace` compiles its snippets too);
#   3. `mdbook build docs` renders the book into docs/book/;
#   4. `mdbook test docs` compiles every Rust snippet of the guide against lumen's crates (and
#      runs those not marked `no_run`).
#
#   scripts/docs-check.sh
#
# Step 4 links against the debug build of the workspace: it runs `cargo test --workspace
# --no-run` (a no-op right after `cargo test --workspace`, as in .ci/run) to learn which
# `liblumen-*.rlib` that build made. `mdbook test -L DIR` fails when DIR holds two builds of the
# `lumen` crate (a `--features cuda` build, or `cargo check`'s metadata), so when the deps folder
# holds more than one, the snippets see a copy of it (symbolic links) without the others.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
target_dir=${CARGO_TARGET_DIR:-target}
start=$SECONDS

# 1. mdbook. An mdbook of another version on PATH is left alone: the pinned one is installed
#    under the target folder instead.
mdbook=""
if command -v mdbook > /dev/null && [[ $(mdbook --version) == "mdbook v$MDBOOK_VERSION" ]]; then
    mdbook=$(command -v mdbook)
elif [[ -x "$target_dir/docs-tools/bin/mdbook" ]]; then
    mdbook="$target_dir/docs-tools/bin/mdbook"
else
    install_args=(mdbook --version "$MDBOOK_VERSION" --locked --no-default-features --features search)
    if command -v mdbook > /dev/null; then
        echo "docs-check: $(mdbook --version) on PATH, not v$MDBOOK_VERSION: installing v$MDBOOK_VERSION into $target_dir/docs-tools"
        install_args+=(--root "$target_dir/docs-tools")
        mdbook="$target_dir/docs-tools/bin/mdbook"
    else
        echo "docs-check: installing mdbook v$MDBOOK_VERSION (cargo install --locked --no-default-features --features search)"
    fi
    t=$SECONDS
    cargo install "${install_args[@]}"
    echo "docs-check: mdbook installed in $((SECONDS - t)) s"
    [[ -n $mdbook ]] || mdbook=$(command -v mdbook || echo "${CARGO_HOME:-$HOME/.cargo}/bin/mdbook")
fi
echo "docs-check: using $("$mdbook" --version) ($mdbook)"

# 2. Links and paths.
python3 - <<'EOF'
import os, re, sys

def slug(heading):
    # mdBook's heading ids (GitHub's are the same for these headings): lower case, spaces to
    # '-', only letters, digits, '-' and '_' kept.
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading).strip().lower()
    return "".join(c for c in text.replace(" ", "-") if c.isalnum() or c in "-_")

def anchors(path):
    ids, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            base = slug(line.lstrip("#"))
            n, name = 0, base
            while name in ids:
                n += 1
                name = f"{base}-{n}"
            ids.add(name)
    return ids

root = os.getcwd()
pages = ["README.md"] + sorted(
    os.path.join("docs/src", f) for f in os.listdir("docs/src") if f.endswith(".md"))
link = re.compile(r"\]\(([^)\s]+)\)")
errors = []
for page in pages:
    text = open(page, encoding="utf-8").read()
    if "../shared" in text or "/work/" in text:
        errors.append(f"{page}: names a path outside the repository (../shared or /work/)")
    fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if not fence and line.strip() == "```":
                errors.append(f"{page}:{number}: a code block without a language (rustdoc "
                              "would test it as Rust; say `text`, `sh`, `rust`...)")
            fence = not fence
            continue
        if fence:
            continue
        for target in link.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
            where = f"{page}:{number}: link {target}"
            if not os.path.realpath(path).startswith(root + os.sep):
                errors.append(f"{where} leaves the repository")
            elif not os.path.exists(path):
                errors.append(f"{where}: no file {path}")
            elif anchor and path.endswith(".md") and anchor not in anchors(path):
                errors.append(f"{where}: {path} has no heading #{anchor}")
summary = open("docs/src/SUMMARY.md", encoding="utf-8").read()
for page in pages[1:]:
    name = os.path.basename(page)
    if name != "SUMMARY.md" and f"({name})" not in summary:
        errors.append(f"docs/src/SUMMARY.md does not list {name}")
lib = open("src/lib.rs", encoding="utf-8").read()
for page in pages:
    if page.endswith("SUMMARY.md"):
        continue
    if f'include_str!("../{page}")' not in lib:
        errors.append(f"src/lib.rs does not include {page} as a doctest (its `guide` module)")
for e in errors:
    print(f"error: {e}", file=sys.stderr)
if errors:
    sys.exit(1)
print(f"docs-check: links of {len(pages)} pages resolve")
EOF

# 3. Build.
t=$SECONDS
"$mdbook" build docs
echo "docs-check: mdbook build docs done in $((SECONDS - t)) s"

# 4. Test the snippets against the workspace's debug build.
t=$SECONDS
rlib=$(cargo test --workspace --no-run --message-format=json 2> /dev/null | python3 -c '
import json, sys
rlibs = set()
for line in sys.stdin:  # read it all: cargo must not see a closed pipe
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "lumen" \
            and "lib" in m["target"]["kind"]:
        rlibs.update(f for f in m["filenames"] if f.endswith(".rlib"))
print("\n".join(sorted(rlibs)))
')
if [[ -z $rlib || $rlib == *$'\n'* ]]; then
    echo "error: cargo test --workspace --no-run built ${rlib:+more than one }${rlib:-no} liblumen rlib (run it to see why)" >&2
    exit 1
fi
deps=$(dirname "$rlib")
chosen=$(basename "$rlib" .rlib)
others=$(find "$deps" -maxdepth 1 -name 'liblumen-*' ! -name "$chosen.*" | wc -l)
if [[ $others -eq 0 ]]; then
    libdir=$deps
else
    libdir=$(mktemp -d)
    trap 'rm -rf "$libdir"' EXIT
    find "$deps" -maxdepth 1 -mindepth 1 ! -name 'liblumen-*' -exec ln -s -t "$libdir" {} +
    ln -s "$deps/$chosen".* "$libdir"/
    echo "docs-check: $deps holds $others other liblumen-* files; testing against $chosen only"
fi
"$mdbook" test docs -L "$libdir"
echo "docs-check: mdbook test docs done in $((SECONDS - t)) s"
echo "docs-check: passed in $((SECONDS - start)) s"
