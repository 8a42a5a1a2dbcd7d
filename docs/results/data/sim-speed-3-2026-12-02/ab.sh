#!/bin/bash
# usage: ab.sh OUTDIR ROW...  : each row on before then after tree, alternating
out=$1; shift
for row in "$@"; do
  /tmp/s3/runrows.sh /tmp/s3base $out/before $row | sed 's/^/before /'
  /tmp/s3/runrows.sh /tmp/s3after $out/after $row | sed 's/^/after  /'
done
