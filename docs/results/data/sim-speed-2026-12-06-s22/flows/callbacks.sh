#!/bin/bash
# callbacks.sh TAG: of FlowNet._wake's inclusive instructions (/tmp/h22f-TAG.out), those of the calls it makes to
# the ended transfers' ``then`` (the engine's code: PyObject_Vectorcall, one a transfer that ends), from the call tree.
tag=$1; cd /tmp
callgrind_annotate --auto=no --threshold=100 --inclusive=yes --tree=calling /tmp/h22f-$tag.out \
  | awk '/\*  .*CPyDef_flows___FlowNet____wake /{on=1; next} on && NF==0 {on=0} on && /PyObject_Vectorcall/ {print "'$tag' _wake calls", $1, $NF, $(NF-1)}'
