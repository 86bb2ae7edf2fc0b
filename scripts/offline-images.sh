#!/usr/bin/env bash
# Build the base images the tests, the benchmarks and the simulator use,
# without any registry, from what this machine has, and load them with
# `docker import` under the names the Dockerfiles use:
#
#   miles-gb10-lab/busybox:stable        Debian's busybox-static, or any busybox
#                                        on PATH with the libraries it links
#   miles-gb10-lab/python:3.11-bookworm  a debootstrap of Debian bookworm with
#                                        python3 (needs debootstrap, root and a
#                                        Debian mirror in the apt sources); else
#                                        the python3 of this machine, its standard
#                                        library, /bin/sh and a few core utilities
#                                        (scripts/host-rootfs.py; any user)
#
# The Debian mirror is the one this machine's apt sources name (never written
# in this project), or $DEBIAN_MIRROR. Air-gapped labs can use it as it is.
#
# Usage: scripts/offline-images.sh [--force] [--only busybox|python]
#                                  [--python-from auto|debootstrap|host]
#                                  [--print-mirror] [--print-tags]
#   --force         rebuild images whose tags already exist
#   --only KIND     build (or print the tag of) one of the two images
#   --python-from   auto (default): debootstrap where it can run, else the host's
#   --print-mirror  print the Debian mirror that would be used, and exit
#   --print-tags    print the tags this script makes, and exit
# Exit status: 0 the images exist; 69 one cannot be built on this machine (the
# last line says why and which command enables it); 1 any other failure.
# Environment:
#   DEBIAN_MIRROR    mirror for debootstrap (default: from the apt sources)
#   DEBIAN_SUITE     Debian release for the Python image (default: bookworm)
#   APT_SOURCES_DIR  where apt's sources live (default: /etc/apt)
#   OS_RELEASE       the host's os-release file (default: /etc/os-release)
#   BUSYBOX          the busybox to use (default: the one on PATH)
#   HOST_PYTHON      the python3 to copy (default: /usr/bin/python3, else python3 on PATH)
#   OFFLINE_BUSYBOX_TAG, OFFLINE_PYTHON_TAG   other tags, for a trial build beside the real ones
set -euo pipefail

# The image names the Dockerfiles use in FROM: change them here, and there.
BUSYBOX_TAG=${OFFLINE_BUSYBOX_TAG:-miles-gb10-lab/busybox:stable}
PYTHON_TAG=${OFFLINE_PYTHON_TAG:-miles-gb10-lab/python:3.11-bookworm} # bookworm's python3 is 3.11

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
APT_SOURCES_DIR=${APT_SOURCES_DIR:-/etc/apt}
OS_RELEASE=${OS_RELEASE:-/etc/os-release}
STD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL=org.miles-gb10-lab.offline-image
UNAVAILABLE=69 # EX_UNAVAILABLE: the tests skip what this cannot build, with the reason

WORK=""
cleanup() { [ -z "$WORK" ] || rm -rf "$WORK"; }
trap cleanup EXIT

say() { echo "offline-images: $*" >&2; }
die() { say "$*"; exit 1; }
# The last line names what is missing and the command that installs it.
unavailable() { say "$*"; exit $UNAVAILABLE; }

fresh_work_dir() {
    cleanup
    WORK=$(mktemp -d)
}

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
# Prints nothing when there is none.
find_mirror() {
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
    [ -z "$uri" ] || echo "${uri%/}"
}

no_mirror="no Debian mirror for '$DEBIAN_SUITE' in the apt sources under $APT_SOURCES_DIR; set DEBIAN_MIRROR"

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# docker import a root file system tar, labelled with where it came from.
import_rootfs() { # TAR TAG ORIGIN MESSAGE CHANGE...
    local tar=$1 tag=$2 origin=$3 message=$4
    shift 4
    local changes=(--change "ENV PATH=$STD_PATH" --change "LABEL $LABEL=$origin")
    for change in "$@"; do changes+=(--change "$change"); done
    docker import "${changes[@]}" --message "$message" "$tar" "$tag" >/dev/null
}

host_python() {
    local python=${HOST_PYTHON:-}
    if [ -z "$python" ]; then
        if [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; else python=$(command -v python3 || true); fi
    fi
    [ -n "$python" ] && "$python" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null \
        || unavailable "cannot build $1: no python3 (3.8 or later) on this machine; install it: sudo apt-get install python3"
    command -v ldd >/dev/null || unavailable "cannot build $1: no ldd on this machine; install it: sudo apt-get install libc-bin"
    echo "$python"
}

build_busybox() {
    local busybox=${BUSYBOX:-$(command -v busybox || true)} python origin=busybox-static
    [ -n "$busybox" ] && [ -x "$busybox" ] \
        || unavailable "cannot build $BUSYBOX_TAG: no busybox on this machine; install one: sudo apt-get install busybox-static"
    python=$(host_python "$BUSYBOX_TAG")
    ldd "$busybox" >/dev/null 2>&1 && origin=host-busybox # dynamically linked: its libraries come along
    fresh_work_dir
    "$python" "$HERE/host-rootfs.py" busybox "$busybox" >"$WORK/rootfs.tar"
    import_rootfs "$WORK/rootfs.tar" "$BUSYBOX_TAG" "$origin" "busybox from $busybox" 'CMD ["sh"]'
}

# Why debootstrap cannot make the Python image here; nothing when it can.
debootstrap_blocker() {
    if ! command -v debootstrap >/dev/null; then echo "debootstrap is not installed"
    elif [ "$(id -u)" != 0 ]; then echo "debootstrap needs root"
    elif [ -z "$(find_mirror)" ]; then echo "$no_mirror"
    fi
}

python_by_debootstrap() {
    local mirror root
    mirror=$(find_mirror)
    fresh_work_dir
    root=$WORK/rootfs
    say "debootstrap $DEBIAN_SUITE with python3 from $mirror"
    if ! debootstrap --variant=minbase --include=python3 "$DEBIAN_SUITE" "$root" "$mirror" >"$WORK/debootstrap.log" 2>&1; then
        tail -n 20 "$WORK/debootstrap.log" >&2
        say "debootstrap failed (last lines above)"
        return 1
    fi
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/*.log \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
    : >"$root/etc/resolv.conf" # the host's; Docker mounts its own
    : >"$root/etc/hostname"
    ln -sf /usr/bin/python3 "$root/usr/local/bin/python" # as the python images have
    tar -C "$root" --numeric-owner -cf "$WORK/rootfs.tar" . || return 1
    import_rootfs "$WORK/rootfs.tar" "$PYTHON_TAG" "debootstrap-$DEBIAN_SUITE" \
        "Debian $DEBIAN_SUITE (debootstrap minbase) with python3" 'ENV LANG=C.UTF-8' 'CMD ["python3"]'
}

python_from_host() {
    local python version
    python=$(host_python "$PYTHON_TAG")
    version=$("$python" -c 'import platform; print(platform.python_version())')
    say "copying Python $version ($python) with its standard library and the libraries it links"
    fresh_work_dir
    "$python" "$HERE/host-rootfs.py" python >"$WORK/rootfs.tar"
    import_rootfs "$WORK/rootfs.tar" "$PYTHON_TAG" "host-python-$version" \
        "Python $version of the build machine, its standard library and /bin/sh" 'ENV LANG=C.UTF-8' 'CMD ["python3"]'
}

build_python() {
    local blocker
    case $PYTHON_FROM in
        host) python_from_host ;;
        debootstrap)
            blocker=$(debootstrap_blocker)
            [ -z "$blocker" ] || unavailable "cannot build $PYTHON_TAG with debootstrap: $blocker; --python-from auto copies this machine's python3"
            python_by_debootstrap || die "debootstrap failed"
            ;;
        auto)
            blocker=$(debootstrap_blocker)
            if [ -n "$blocker" ]; then
                say "$blocker: the image is made of the python3 of this machine"
                python_from_host
            elif ! python_by_debootstrap; then
                say "so the image is made of the python3 of this machine"
                python_from_host
            fi
            ;;
    esac
}

check_runs() {
    case $1 in
        busybox) docker run --rm --network none "$BUSYBOX_TAG" sh -c 'echo ok' >/dev/null || die "$BUSYBOX_TAG does not run" ;;
        python) docker run --rm --network none "$PYTHON_TAG" python3 -c 'print("ok")' >/dev/null || die "$PYTHON_TAG does not run" ;;
    esac
}

tag_of() { if [ "$1" = busybox ]; then echo "$BUSYBOX_TAG"; else echo "$PYTHON_TAG"; fi; }

main() {
    local force=0 kinds=(busybox python) want=""
    PYTHON_FROM=auto
    while [ $# -gt 0 ]; do
        case $1 in
            --force) force=1 ;;
            --only)
                case ${2:-} in busybox | python) kinds=("$2") ;; *) die "--only takes busybox or python" ;; esac
                shift
                ;;
            --python-from)
                case ${2:-} in auto | debootstrap | host) PYTHON_FROM=$2 ;; *) die "--python-from takes auto, debootstrap or host" ;; esac
                shift
                ;;
            --print-mirror | --print-tags) want=$1 ;;
            -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; return ;;
            *) die "unknown argument '$1' (see --help)" ;;
        esac
        shift
    done
    case $want in
        --print-mirror) find_mirror | grep . || die "$no_mirror"; return ;;
        --print-tags) for kind in "${kinds[@]}"; do tag_of "$kind"; done; return ;;
    esac
    docker info >/dev/null 2>&1 || unavailable "no Docker engine answers; start one: sudo systemctl start docker"
    local kind tag
    for kind in "${kinds[@]}"; do
        tag=$(tag_of "$kind")
        if [ $force = 0 ] && have_image "$tag"; then
            say "$tag exists (--force rebuilds it)"
            continue
        fi
        say "building $tag"
        "build_$kind"
        check_runs "$kind"
        say "built $tag"
    done
}

main "$@"
