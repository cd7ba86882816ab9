#!/usr/bin/env bash
# The results site in a real browser: the site of the committed results (as `make site` builds
# it) is generated twice and must be the same byte for byte; every href and src of every page
# must name a file inside the site (no external request, no broken link); then headless
# Chromium (Debian's, installed by tools/setup.sh) opens every page, and any console message
# (a script error, a failed request) or an image that does not load fails the test. The index's
# screenshot is saved for a person to look at. Chromium missing is a failure, never a skip.
#   tests/test_site.sh SDPA_BENCH SCREENSHOT.png   (from the source root)
set -euo pipefail
bench=$(realpath "$1")
shot=$(realpath -m "$2")

fail() {
  echo "test_site: FAIL: $*" >&2
  exit 1
}
command -v chromium >/dev/null ||
  fail "chromium not found: the browser test needs it (tools/setup.sh --test installs it)"

tmp=$(mktemp -d /tmp/sdpa-site.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The reference results, as the Makefile's REFERENCE_RESULTS lists them.
mapfile -t files < <(ls results/*/*.json | grep -Ev -- '-[0-9]{8}T[0-9]{6}Z\.json$')
[[ ${#files[@]} -gt 0 ]] || fail "no result files in results/*/"
"$bench" report "${files[@]}" --html "$tmp/site" --plot-scripts "$tmp/scripts-a" 2>"$tmp/a.err" ||
  fail "report --html: $(cat "$tmp/a.err")"
"$bench" report "${files[@]}" --html "$tmp/again" --plot-scripts "$tmp/scripts-b" 2>/dev/null ||
  fail "report --html, the second time"
diff -r "$tmp/site" "$tmp/again" >"$tmp/diff" || fail "the site differs between two runs: $(head -5 "$tmp/diff")"
site=$tmp/site

mapfile -t pages < <(cd "$site" && find . -name '*.html' -printf '%P\n' | sort)
[[ -f $site/index.html && -f $site/claims.html ]] || fail "no index.html or claims.html"
[[ ${#pages[@]} -gt 10 ]] || fail "only ${#pages[@]} pages"

# Every reference resolves to a file of the site.
links=0
for page in "${pages[@]}"; do
  dir=$(dirname "$site/$page")
  while read -r ref; do
    case $ref in
      *:* | //*) fail "$page: a reference outside the site: $ref" ;;
    esac
    target=${ref%%#*}
    target=${target//&amp;/&}
    [[ -n $target ]] || continue
    [[ -f $dir/$target ]] || fail "$page: broken link or image: $ref"
    [[ $(realpath "$dir/$target") == "$(realpath "$site")"/* ]] || fail "$page: $ref leaves the site"
    links=$((links + 1))
  done < <(grep -oE '(href|src)="[^"]*"' "$site/$page" | sed -E 's/^(href|src)="(.*)"$/\2/')
done
[[ $links -gt 100 ]] || fail "only $links links and images in ${#pages[@]} pages"

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --enable-logging=stderr --v=0 --allow-file-access-from-files)
browse() {  # browse PROFILE ARGS...: chromium with a new empty profile, at most two minutes
  local profile=$tmp/profile-$1
  shift
  mkdir "$profile"
  timeout 120 chromium "${flags[@]}" --user-data-dir="$profile" "$@"
}

# A harness page beside the site opens every page in a frame and, once it has loaded (images
# included), lists the images that did not load; Chromium prints the harness's DOM at the end.
{
  echo '<!DOCTYPE html><html><head><meta charset="utf-8"><title>harness</title></head><body>'
  echo '<script>'
  printf 'const pages = ['
  printf '"site/%s",' "${pages[@]}"
  echo '];'
  cat <<'EOF'
const open = (p) => new Promise((done) => {
  const frame = document.createElement("iframe");
  frame.onload = () => {
    const doc = frame.contentDocument;
    if (!doc || !doc.querySelector("h1")) return done(p + ": not loaded");
    const bad = [...doc.images].filter((i) => !i.complete || i.naturalWidth === 0)
                               .map((i) => i.getAttribute("src"));
    frame.remove();
    done(bad.length ? p + ": images not loaded: " + bad.join(" ") : "");
  };
  frame.src = p;
  document.body.appendChild(frame);
});
(async () => {
  const problems = [];
  for (const p of pages) { const r = await open(p); if (r) problems.push(r); }
  const out = document.createElement("pre");
  out.id = "verdict";
  out.textContent = "opened " + pages.length + " pages\n" + problems.join("\n");
  document.body.appendChild(out);
})();
EOF
  echo '</script></body></html>'
} >"$tmp/harness.html"
browse harness --virtual-time-budget=120000 --dump-dom "file://$tmp/harness.html" \
  >"$tmp/harness.dom" 2>"$tmp/harness.log" || fail "chromium failed on the harness: $(tail -5 "$tmp/harness.log")"
verdict=$(sed -n '/<pre id="verdict">/,/<\/pre>/p' "$tmp/harness.dom")
[[ $verdict == *"opened ${#pages[@]} pages"* ]] || fail "the harness did not finish: $(tail -c 500 "$tmp/harness.dom")"
problems=$(sed -e 's/<pre id="verdict">opened [0-9]* pages//' -e 's/<\/pre>.*//' <<<"$verdict" | grep -v '^\s*$' || true)
[[ -z $problems ]] || fail "$problems"
# Console messages: script errors, failed requests, resources refused.
if grep -E 'CONSOLE|ERR_|Uncaught|Not allowed to load' "$tmp/harness.log" >"$tmp/console"; then
  fail "console: $(head -5 "$tmp/console")"
fi

mkdir -p "$(dirname "$shot")"
browse shot --window-size=1400,2400 --hide-scrollbars --screenshot="$shot" "file://$site/index.html" \
  >/dev/null 2>"$tmp/shot.log" || fail "chromium failed on the screenshot: $(tail -5 "$tmp/shot.log")"
[[ -s $shot ]] || fail "no screenshot"
echo "test_site: ${#pages[@]} pages, $links links and images, all load in Chromium; index: $shot"
