#!/usr/bin/env bash
# Makes a Docker engine and the test image available for the Docker
# sandbox tests, from scratch on a Debian machine, without any registry:
#   - installs docker.io (and busybox-static) with apt-get when missing;
#   - starts dockerd without a bridge or iptables when no daemon answers;
#   - imports aml-test/busybox:1 (a static busybox as the whole rootfs);
#   - with --debian, also imports debian:bookworm-slim from a debootstrap of
#     Debian's mirror (minutes, once: the engine keeps it), the base of
#     images/sandbox/Dockerfile, which TestSandboxImage builds.
# It never fails: what it cannot do, it says, and the tests skip saying why.
set -uo pipefail

image=aml-test/busybox:1
debian=false
[[ ${1:-} == --debian ]] && debian=true
sudo=""
if [[ $(id -u) != 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else sudo=unavailable; fi
fi

apt_install() {
  [[ $sudo == unavailable ]] && return 1
  command -v apt-get >/dev/null 2>&1 || return 1
  local apt=($sudo env DEBIAN_FRONTEND=noninteractive apt-get)
  "${apt[@]}" install -y --no-install-recommends "$@" >/tmp/aml-apt.log 2>&1 \
    || { "${apt[@]}" update >>/tmp/aml-apt.log 2>&1 && "${apt[@]}" install -y --no-install-recommends "$@" >>/tmp/aml-apt.log 2>&1; }
}

if ! command -v dockerd >/dev/null 2>&1; then
  if apt_install docker.io; then echo "installed docker.io"; else
    echo "docker.io could not be installed (no apt-get or no root): the Docker tests will skip"; tail -3 /tmp/aml-apt.log 2>/dev/null; exit 0
  fi
fi
# The image is a static busybox alone: Debian's busybox-static.
if ! dpkg -s busybox-static >/dev/null 2>&1; then
  apt_install busybox-static || { echo "busybox-static could not be installed: the Docker tests will skip"; exit 0; }
fi

if ! docker version >/dev/null 2>&1; then
  if [[ $sudo == unavailable ]]; then echo "no Docker daemon answers and it cannot be started without root: the Docker tests will skip"; exit 0; fi
  echo "starting dockerd (no bridge, no iptables; log in /tmp/aml-dockerd.log)"
  $sudo sh -c 'nohup dockerd --bridge=none --iptables=false --ip-forward=false >/tmp/aml-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do docker version >/dev/null 2>&1 && break; sleep 0.5; done
fi
if ! docker version >/dev/null 2>&1; then
  echo "dockerd did not start: the Docker tests will skip"; tail -5 /tmp/aml-dockerd.log 2>/dev/null; exit 0
fi
echo "Docker engine: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})' 2>/dev/null)"

import_debian() {
  local base=debian:bookworm-slim
  if docker image inspect "$base" >/dev/null 2>&1; then echo "image $base: present"; return; fi
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap || { echo "debootstrap could not be installed: TestSandboxImage will skip"; return; }
  local root
  root=$(mktemp -d)
  echo "debootstrap of bookworm for $base (a few minutes)"
  if $sudo debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/tmp/aml-debootstrap.log 2>&1 \
     && $sudo tar -C "$root" -c . | docker import - "$base" >/dev/null; then
    echo "image $base: imported from a debootstrap of bookworm"
  else
    echo "the debootstrap of bookworm failed (see /tmp/aml-debootstrap.log): TestSandboxImage will skip"
  fi
  $sudo rm -rf "$root"
}
$debian && import_debian

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "image $image: present"
  exit 0
fi
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/workspace" "$rootfs/etc"
cp /bin/busybox "$rootfs/bin/busybox"
for applet in $(/bin/busybox --list); do
  [[ $applet == busybox ]] || ln -sf busybox "$rootfs/bin/$applet"
done
chmod 1777 "$rootfs/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
if tar -C "$rootfs" -c . | docker import --change 'ENV PATH=/bin' - "$image" >/dev/null; then
  echo "image $image: imported from busybox-static"
else
  echo "importing $image failed: the Docker tests that need it will skip"
fi
exit 0
