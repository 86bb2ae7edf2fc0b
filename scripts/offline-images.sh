#!/usr/bin/env bash
# Build the base images the tests and the simulator use, without any registry:
# a busybox image from Debian's busybox-static, and a Python image from a
# debootstrap of Debian with python3, both loaded with `docker import` under
# the names the Dockerfiles use. Air-gapped labs can use it as it is.
#
# The Debian mirror is the one this machine's apt sources name (never written
# in this project), or $DEBIAN_MIRROR.
#
# Usage: scripts/offline-images.sh [--force] [--print-mirror] [--print-tags]
#   --force         rebuild images whose tags already exist
#   --print-mirror  print the Debian mirror that would be used, and exit
#   --print-tags    print the tags this script makes, and exit
# Environment:
#   DEBIAN_MIRROR    mirror for debootstrap (default: from the apt sources)
#   DEBIAN_SUITE     Debian release for the Python image (default: bookworm)
#   APT_SOURCES_DIR  where apt's sources live (default: /etc/apt)
#   OS_RELEASE       the host's os-release file (default: /etc/os-release)
#   BUSYBOX          a statically linked busybox (default: the one on PATH)
set -euo pipefail

# The image names the Dockerfiles use in FROM: change them here, and there.
BUSYBOX_TAG=busybox:stable
PYTHON_TAG=python:3.11-slim-bookworm # bookworm's python3 is 3.11

DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
APT_SOURCES_DIR=${APT_SOURCES_DIR:-/etc/apt}
OS_RELEASE=${OS_RELEASE:-/etc/os-release}
STD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL=org.miles-gb10-lab.offline-image

WORK=""
cleanup() { [ -z "$WORK" ] || rm -rf "$WORK"; }
trap cleanup EXIT

say() { echo "offline-images: $*" >&2; }
die() { say "$*"; exit 1; }

# Print "URI<TAB>suite" for every enabled binary (deb) source with the `main`
# component: one-line sources.list files and deb822 .sources files alike.
apt_sources() {
    local dir=$APT_SOURCES_DIR files=()
    [ -f "$dir/sources.list" ] && files+=("$dir/sources.list")
    for f in "$dir"/sources.list.d/*.list; do [ -f "$f" ] && files+=("$f"); done
    if [ ${#files[@]} -gt 0 ]; then
        awk '
            { sub(/#.*/, "") }
            $1 != "deb" { next }
            {
                i = 2
                if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                uri = $i; suite = $(i + 1); main = 0
                for (j = i + 2; j <= NF; j++) if ($j == "main") main = 1
                if (main) print uri "\t" suite
            }' "${files[@]}"
    fi
    for f in "$dir"/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '
            function flush(   nu, ns, u, s, a, b) {
                if (f["types"] ~ /(^| )deb( |$)/ && f["components"] ~ /(^| )main( |$)/ \
                    && f["enabled"] !~ /^ *(no|false) *$/) {
                    nu = split(f["uris"], a, " "); ns = split(f["suites"], b, " ")
                    for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) print a[u] "\t" b[s]
                }
                split("", f); key = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ { if (key != "") f[key] = f[key] " " $0; next }
            /^[A-Za-z0-9-]+:/ {
                key = tolower(substr($0, 1, index($0, ":") - 1))
                f[key] = substr($0, index($0, ":") + 1)
            }
            END { flush() }' "$f"
    done
}

# The mirror for debootstrap: $DEBIAN_MIRROR, else the first source for the
# suite we build, else (on a Debian host) the first for the host's own release.
debian_mirror() {
    if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
    local sources host_id="" host_codename="" uri
    sources=$(apt_sources | awk -F '\t' '$1 ~ /^(https?|file):/')
    if [ -r "$OS_RELEASE" ]; then
        host_id=$(. "$OS_RELEASE" && echo "${ID:-}")
        host_codename=$(. "$OS_RELEASE" && echo "${VERSION_CODENAME:-}")
    fi
    uri=$(awk -F '\t' -v s="$DEBIAN_SUITE" '$2 == s { print $1; exit }' <<<"$sources")
    if [ -z "$uri" ] && [ "$host_id" = debian ] && [ -n "$host_codename" ]; then
        uri=$(awk -F '\t' -v s="$host_codename" '$2 == s { print $1; exit }' <<<"$sources")
    fi
    [ -n "$uri" ] || die "no Debian mirror for '$DEBIAN_SUITE' in the apt sources under $APT_SOURCES_DIR; set DEBIAN_MIRROR"
    echo "${uri%/}"
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

build_busybox() {
    local busybox=${BUSYBOX:-$(command -v busybox || true)} root applet
    [ -n "$busybox" ] || die "no busybox found: install Debian's busybox-static"
    if ldd "$busybox" >/dev/null 2>&1; then
        die "$busybox is dynamically linked: install Debian's busybox-static (or set BUSYBOX)"
    fi
    cleanup
    WORK=$(mktemp -d)
    root=$WORK/rootfs
    mkdir -p "$root"/{bin,etc,root,tmp,var/tmp}
    chmod 1777 "$root/tmp" "$root/var/tmp"
    cp "$busybox" "$root/bin/busybox"
    for applet in $("$busybox" --list); do
        [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    tar -C "$root" --numeric-owner -c . | docker import \
        --change "ENV PATH=$STD_PATH" --change 'CMD ["sh"]' \
        --change "LABEL $LABEL=busybox-static" \
        --message "busybox from Debian's busybox-static" - "$BUSYBOX_TAG" >/dev/null
}

build_python() {
    local mirror root
    mirror=$(debian_mirror)
    command -v debootstrap >/dev/null || die "debootstrap is not installed"
    [ "$(id -u)" = 0 ] || die "debootstrap needs root"
    cleanup
    WORK=$(mktemp -d)
    root=$WORK/rootfs
    say "debootstrap $DEBIAN_SUITE with python3 from $mirror"
    debootstrap --variant=minbase --include=python3 "$DEBIAN_SUITE" "$root" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (last lines above)"; }
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/*.log \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
    : >"$root/etc/resolv.conf" # the host's; Docker mounts its own
    : >"$root/etc/hostname"
    ln -sf /usr/bin/python3 "$root/usr/local/bin/python" # as the python images have
    tar -C "$root" --numeric-owner -c . | docker import \
        --change "ENV PATH=$STD_PATH" --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
        --change "LABEL $LABEL=debootstrap-$DEBIAN_SUITE" \
        --message "Debian $DEBIAN_SUITE (debootstrap minbase) with python3" - "$PYTHON_TAG" >/dev/null
}

main() {
    local force=0
    for arg in "$@"; do
        case $arg in
            --force) force=1 ;;
            --print-mirror) debian_mirror; return ;;
            --print-tags) echo "$BUSYBOX_TAG"; echo "$PYTHON_TAG"; return ;;
            -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; return ;;
            *) die "unknown argument '$arg' (see --help)" ;;
        esac
    done
    docker info >/dev/null 2>&1 || die "no Docker engine answers (is dockerd running?)"
    local tag builder
    for tag in "$BUSYBOX_TAG" "$PYTHON_TAG"; do
        builder=build_busybox
        [ "$tag" = "$PYTHON_TAG" ] && builder=build_python
        if [ $force = 0 ] && have_image "$tag"; then
            say "$tag exists (--force rebuilds it)"
            continue
        fi
        say "building $tag"
        "$builder"
        say "built $tag"
    done
    docker run --rm --network none "$BUSYBOX_TAG" sh -c 'echo ok' >/dev/null || die "$BUSYBOX_TAG does not run"
    docker run --rm --network none "$PYTHON_TAG" python3 -c 'print("ok")' >/dev/null \
        || die "$PYTHON_TAG does not run"
}

main "$@"
