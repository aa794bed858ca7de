#!/usr/bin/env python3
"""Checks that every relative link in README.md and docs/**/*.md resolves: the file exists in
the repository and, for links with a #fragment, the target has a heading with that GitHub
anchor. Also checks every page a source file, config, script or doc names in plain text
(a docs page, with an optional #anchor) and every path into the repository's public data
(`data/...`): each must exist. Exit 1 with one line per broken link.
Usage: scripts/check_links.py [ROOT]"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent).resolve()
LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)')
FENCE = re.compile(r'^(```|~~~)')


def anchors(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -N suffixes."""
    seen, result, in_code = {}, set(), False
    for line in path.read_text(encoding='utf-8').splitlines():
        if FENCE.match(line):
            in_code = not in_code
        if in_code or not line.startswith('#'):
            continue
        text = line.lstrip('#').strip().lower()
        slug = re.sub(r'[^\w\- ]', '', text).replace(' ', '-')
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        result.add(slug if n == 0 else f'{slug}-{n}')
    return result


def links(path):
    in_code = False
    for number, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        line = re.sub(r'`[^`]*`', '', line)
        for match in LINK.finditer(line):
            yield number, match.group(1) or match.group(2)


broken = []
pages = [root / 'README.md'] + sorted((root / 'docs').rglob('*.md')) + sorted(root.glob('*/README.md'))
for page in pages:
    for number, target in links(page):
        if re.match(r'^[a-z]+:', target):      # https:, mailto: ... are not checked (no network)
            continue
        file_part, _, fragment = target.partition('#')
        dest = (page.parent / file_part).resolve() if file_part else page
        rel = page.relative_to(root)
        if not dest.exists():
            broken.append(f'{rel}:{number}: {target}: no such file')
        elif not str(dest).startswith(str(root.resolve())):
            broken.append(f'{rel}:{number}: {target}: outside the repository')
        elif fragment and dest.suffix == '.md' and fragment not in anchors(dest):
            broken.append(f'{rel}:{number}: {target}: no heading with anchor #{fragment}')
# Plain-text mentions of documentation pages and of data files in every tracked text file.
MENTION = re.compile(r'(?<![\w./$-])((?:docs|data)/[\w./{}*<>-]*[\w}*>])(#[\w-]+)?')
# data/ mentions are checked when they name one of data/'s folders (a path such as
# "data/ground_truth_single.csv" inside another repository's source citation is not ours).
DATA_FOLDERS = {p.name for p in (root / 'data').iterdir() if p.is_dir()} if (root / 'data').is_dir() else set()
TEXT = {'.md', '.cpp', '.hpp', '.cu', '.h', '.json', '.sh', '.py', '.txt', '.in', '.cmake'}


def tracked_files():
    try:
        import subprocess
        out = subprocess.run(['git', '-C', str(root), 'ls-files'], capture_output=True, text=True, check=True).stdout
        return [root / line for line in out.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in root.rglob('*') if p.is_file() and '.git' not in p.parts and not p.parts[-2].startswith('build')]


def expand(path):
    """Brace patterns ({2..8}, {2021,2022}) in a named path: every expansion must exist."""
    m = re.search(r'\{([^}]*)\}', path)
    if not m:
        return [path]
    body = m.group(1)
    if ',' not in body and '..' not in body:
        return []      # a code template such as f'AR_GPU{n}.csv' names no one file
    r = re.fullmatch(r'(\d+)\.\.(\d+)', body)
    items = [str(i) for i in range(int(r.group(1)), int(r.group(2)) + 1)] if r else body.split(',')
    return [q for item in items for q in expand(path[:m.start()] + item + path[m.end():])]


mentions = 0
for f in tracked_files():
    if f.suffix not in TEXT or not f.is_file() or f.parts[len(root.parts)] in ('data', 'tests') and f.suffix == '.csv':
        continue
    try:
        text = f.read_text(encoding='utf-8')
    except (UnicodeDecodeError, OSError):
        continue
    for number, line in enumerate(text.splitlines(), 1):
        for match in MENTION.finditer(line):
            target, fragment = match.group(1).rstrip('.'), (match.group(2) or '')[1:]
            if target.startswith('data/') and ('*' in target or '<' in target or
                                               target.split('/')[1].split('{')[0] not in DATA_FOLDERS):
                continue
            if target.startswith('docs/') and (not target.endswith('.md') or '*' in target):
                continue
            mentions += 1
            for one in expand(target):
                dest = root / one
                rel = f.relative_to(root)
                if not dest.exists():
                    broken.append(f'{rel}:{number}: {one}: no such file (named in the text)')
                elif fragment and dest.suffix == '.md' and fragment not in anchors(dest):
                    broken.append(f'{rel}:{number}: {one}#{fragment}: no heading with that anchor (named in the text)')

print('\n'.join(broken) if broken else f'links: {len(pages)} pages and {mentions} pages or data files named in the text, every one resolves')
sys.exit(1 if broken else 0)
