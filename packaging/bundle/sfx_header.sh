#!/bin/sh
# DFlash Studio, one file (packaging/bundle/build_bundle.sh): this shell header, padded to @HEADER_BYTES@
# bytes, then a tar.gz of the PyInstaller folder. The first start unpacks it once into
# ${XDG_CACHE_HOME:-~/.cache}/dflash-studio/bundle/@ID@/; every start then runs the program there with
# all its arguments: no argument starts the app, a COMMAND runs the CLI (see --help). The user's
# conversations, models and settings live in the XDG data and config folders, never in here.
# DFLASH_BUNDLE_DIR=DIR unpacks into DIR instead of the cache.
set -u
id="@ID@"
skip=@HEADER_BYTES@
self="$0"
case "$self" in /*) ;; *) self="$(pwd)/$self" ;; esac
say() { echo "dflash-studio: $*" >&2; }

if [ -n "${DFLASH_BUNDLE_DIR:-}" ]; then
    base="$DFLASH_BUNDLE_DIR"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
    base="$XDG_CACHE_HOME/dflash-studio/bundle"
elif [ -n "${HOME:-}" ]; then
    base="$HOME/.cache/dflash-studio/bundle"
else
    say "neither HOME nor XDG_CACHE_HOME is set: no folder to unpack into (set DFLASH_BUNDLE_DIR)"
    exit 2
fi
dir="$base/$id"
exe="$dir/dflash-studio/dflash-studio"

if [ ! -x "$exe" ] || [ ! -f "$dir/.complete" ]; then
    mkdir -p "$base" || { say "cannot create $base (set DFLASH_BUNDLE_DIR to a writable folder)"; exit 2; }
    tmp=$(mktemp -d "$base/.unpack-XXXXXX") || { say "cannot write in $base"; exit 2; }
    if ! tail -c +$((skip + 1)) "$self" | gzip -dc | tar -x -C "$tmp"; then
        rm -rf "$tmp"
        say "could not unpack $self into $base (a truncated download, or a full disk?)"
        exit 2
    fi
    : > "$tmp/.complete"
    # only complete folders are renamed into place, so one without .complete is damaged: replace it
    if [ -e "$dir" ] && [ ! -f "$dir/.complete" ]; then
        rm -rf "$dir"
    fi
    if [ -e "$dir" ]; then
        rm -rf "$tmp"                               # another start got there first: use its folder
    else
        mv "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
        rm -rf "$dir/${tmp##*/}"                    # lost a race after all: mv put ours inside the winner's
    fi
fi
DFLASH_BUNDLE="$self"
export DFLASH_BUNDLE
exec "$exe" "$@"
exit 2
