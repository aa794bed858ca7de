#!/usr/bin/env python3
"""Checks that every relative link in README.md and docs/**/*.md resolves: the file exists in
the repository and, for links with a #fragment, the target has a heading with that GitHub
anchor. Exit 1 with one line per broken link. Usage: scripts/check_links.py [ROOT]"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
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
print('\n'.join(broken) if broken else f'links: {len(pages)} pages, every relative link resolves')
sys.exit(1 if broken else 0)
