#!/bin/sh
# make_seeds.sh — regenerates the committed seed corpora of fuzz/corpus/ (run from the
# repository root): Python writes gguf/ and tokenizer/, a small C program built against
# the libraries (libsjkvarn, and libsjkhost for the session-file inspector the
# cache_file target also calls) writes cache_file/ and record/.
set -e
BUILD=${BUILD:-build/seeds}
make --no-print-directory BUILD="$BUILD" "$BUILD/libsjkvarn.a" "$BUILD/libsjkhost.a" >/dev/null
mkdir -p fuzz/corpus/gguf fuzz/corpus/tokenizer fuzz/corpus/cache_file fuzz/corpus/record
python3 fuzz/make_seeds.py
${CC:-cc} -std=c11 -O1 -D_GNU_SOURCE -Iinclude -Isrc -Ihost/include -Ifuzz fuzz/make_seeds.c "$BUILD/libsjkhost.a" "$BUILD/libsjkvarn.a" -lm -lpthread -o "$BUILD/make_seeds"
"$BUILD/make_seeds"
ls -l fuzz/corpus/*/ | awk '{s+=$5} END {print "corpus bytes:", s}'
