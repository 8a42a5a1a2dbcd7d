"""Ir of a callgrind file, and the same less the memcpy that glibc's realloc does (list growth moved
rather than extended in place: a few tens of M that shift with the heap's layout, not the code)."""
import re, subprocess, sys
for f in sys.argv[1:]:
    out = subprocess.run(["callgrind_annotate", "--tree=caller", "--threshold=100", f], capture_output=True, text=True).stdout
    total = int(re.search(r"([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", out).group(1).replace(",", ""))
    lines = out.split("\n")
    moved = 0
    for k, l in enumerate(lines):
        if re.match(r"\s*[\d,]+ \([^)]*\)\s+\*\s+\S*memmove-vec-unaligned-erms.S:__memcpy_avx_unaligned_erms", l):
            j = k - 1
            while j >= 0 and lines[j].strip():
                if "malloc.c:_int_realloc" in lines[j]:
                    moved += int(lines[j].split("(")[0].replace(",", "").strip())
                j -= 1
    print(f"{f}: {total/1e6:9.1f} M Ir, {moved/1e6:6.1f} M of it realloc's memcpy, {(total-moved)/1e6:9.1f} M without")
