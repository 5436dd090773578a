#!/bin/sh
# mixed-text.sh OUT [MIB] - writes MIB (default 8) MiB of mixed text, whole
# lines, for `rontolisp bench --tokenizer': Lisp source (Debian's
# common-lisp sources), English prose (the licence texts under
# /usr/share/common-licenses and /usr/share/doc), and many scripts
# (Unicode's NamesList.txt from unicode-data, whose lines carry each
# character with its name), interleaved line by line so no part comes
# only warm or only cold.
out=${1:?usage: mixed-text.sh OUT [MIB]}
mib=${2:-8}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
find /usr/share/common-lisp/source -name '*.lisp' -type f | sort | xargs cat > "$tmp/code" 2>/dev/null
{ cat /usr/share/common-licenses/* 2>/dev/null
  find /usr/share/doc -name copyright -type f | sort | xargs cat 2>/dev/null; } > "$tmp/prose"
cat /usr/share/unicode/NamesList.txt > "$tmp/scripts" 2>/dev/null
# Keep only lines that are UTF-8 (iconv drops none of a valid line).
for f in code prose scripts; do
  iconv -f UTF-8 -t UTF-8 -c < "$tmp/$f" > "$tmp/$f.u8"
done
paste -d '\n' "$tmp/code.u8" "$tmp/prose.u8" "$tmp/scripts.u8" |
  awk -v max=$((mib * 1048576)) 'length($0) > 0 { n += length($0) + 1; if (n > max) exit; print }' > "$out"
echo "wrote $out: $(wc -c < "$out") bytes, $(wc -l < "$out") lines"
