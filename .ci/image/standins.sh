# Stand-ins for the base images that the Dockerfiles and compose.yaml name,
# which no registry here serves: each is assembled from this machine's own
# files (Debian 12's, and the Go toolchain's), then tagged with the real
# image's name in the check's own podman storage, so that the Dockerfiles and
# compose.yaml are used as they are. Sourced by check.sh, which sets
# CONTAINERS_CONF and CONTAINERS_STORAGE_CONF, and work, its temporary
# directory, and removes that storage at the end. Each function takes the
# name to tag.

# standin_root makes a container from scratch and mounts it; it sets c (the
# container) and root (its mounted file system).
standin_root() {
	c=$(buildah from scratch)
	root=$(buildah mount "$c")
	mkdir -p "$root/etc" "$root/tmp" "$root/root"
	chmod 1777 "$root/tmp"
	chmod 0700 "$root/root"
}

# standin_commit unmounts the container of standin_root, gives it the rest
# of its configuration (the arguments, buildah config's flags) and commits it
# as the image $1.
standin_commit() {
	local name=$1
	shift
	buildah umount "$c" >/dev/null
	buildah config --label "io.example.membership.standin=built by .ci/image/standins.sh from this machine's files" "$@" "$c"
	buildah commit -q --rm --format docker "$c" "$name" >/dev/null
	echo "image-check: stand-in $name: $(podman image inspect --format '{{.Size}}' "$name" | numfmt --to=iec) ($(standin_what "$name"))"
}

postgres_version() {
	"$pg_bin/postgres" --version | awk '{print $3}'
}

standin_what() {
	case $1 in
	*golang*) echo "busybox-static, $(go version | cut -d' ' -f3) from $(go env GOROOT), the modules of go.mod and postgres/go.mod" ;;
	*distroless*) echo "ca-certificates, tzdata, the users root, nobody and nonroot (65532)" ;;
	*postgres*) echo "Debian's postgresql $(postgres_version) with its libraries, busybox-static, .ci/image/postgres-entrypoint.sh" ;;
	esac
}

# standin_copy copies the trees or files it is given (absolute paths) to
# the same paths in the stand-in, with their owners, modes and links.
standin_copy() {
	tar -C / -cf - "${@#/}" | tar -C "$root" -xpf -
}

# standin_busybox puts busybox-static's shell and tools in /bin.
standin_busybox() {
	if ldd /bin/busybox >/dev/null 2>&1; then
		echo "image-check: /bin/busybox is linked dynamically: the stand-ins need busybox-static's" >&2
		return 1
	fi
	mkdir -p "$root/bin"
	cp /bin/busybox "$root/bin/busybox"
	chroot "$root" /bin/busybox --install -s /bin
}

# standin_golang: golang:1.N-bookworm, as far as a CGO_ENABLED=0 build
# uses it (a shell, go, the module cache), with the machine's Go, which must
# be the image's version. The build runs without a network, so the module
# cache holds what go.mod and postgres/go.mod need, downloaded beforehand
# (from the machine's module cache first, then the module proxy), and
# GOPROXY=off says so at once if a module is missing.
standin_golang() {
	local name=$1 want have
	want=$(sed -n 's/.*golang:\([0-9.]*\).*/\1/p' <<<"$name")
	have=$(go env GOVERSION)
	case $have in
	"go$want" | "go$want".*) ;;
	*)
		echo "image-check: the Dockerfiles build on $name, but this machine's Go is $have" >&2
		return 1
		;;
	esac
	# shellcheck disable=SC2154 # work: check.sh's
	local mod="$work/gomod"
	(
		proxy="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)"
		export GOMODCACHE=$mod GOFLAGS=-modcacherw GOPROXY=$proxy
		go mod download && go list -deps . >/dev/null &&
			cd postgres && go mod download && go list -deps ./... >/dev/null
	)
	standin_root
	standin_busybox
	echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
	echo 'root:x:0:' >"$root/etc/group"
	# The toolchain without its own tests and test data (51 MiB).
	mkdir -p "$root/usr/local/go" "$root/go/pkg/mod"
	tar -C "$(go env GOROOT)" -cf - --exclude=./test --exclude=testdata . | tar -C "$root/usr/local/go" -xpf -
	tar -C "$mod" -cf - . | tar -C "$root/go/pkg/mod" -xpf -
	standin_commit "$name" \
		--env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--env GOPATH=/go --env GOTOOLCHAIN=local --env GOPROXY=off --env HOME=/root \
		--workingdir /go --cmd /bin/sh
}

# standin_distroless: gcr.io/distroless/static-debian12:nonroot: no shell, no
# libc; CA certificates, time zones, and the users root, nobody and nonroot
# (65532), which it runs as.
standin_distroless() {
	local name=$1
	standin_root
	cat >"$root/etc/passwd" <<-'EOF'
		root:x:0:0:root:/root:/sbin/nologin
		nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
		nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
	EOF
	cat >"$root/etc/group" <<-'EOF'
		root:x:0:
		nobody:x:65534:
		tty:x:5:
		staff:x:50:
		nonroot:x:65532:
	EOF
	echo 'hosts: files dns' >"$root/etc/nsswitch.conf"
	cp /etc/os-release "$root/etc/os-release"
	mkdir -p "$root/etc/ssl/certs" "$root/home/nonroot"
	cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
	standin_copy /usr/share/zoneinfo
	chown 65532:65532 "$root/home/nonroot"
	chmod 0700 "$root/home/nonroot"
	standin_commit "$name" \
		--env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
		--user 65532 --workingdir /home/nonroot
}

# standin_postgres: postgres:15-bookworm, from Debian's postgresql package
# (its binaries, their libraries, its share directory) with busybox-static
# for the entrypoint's shell; it runs as postgres (999), as the real image's
# server does, with the real image's variables (postgres-entrypoint.sh).
standin_postgres() {
	local name=$1 want
	want=$(sed -n 's/.*postgres:\([0-9]*\).*/\1/p' <<<"$name")
	pg_bin=/usr/lib/postgresql/$want/bin
	if [ ! -x "$pg_bin/postgres" ]; then
		echo "image-check: compose.yaml runs $name, and Debian's postgresql-$want is not installed ($pg_bin/postgres)" >&2
		return 1
	fi
	standin_root
	standin_busybox
	# Without the JIT's module (llvmjit.so and its bitcode, 120 MiB with
	# LLVM's library): the server then runs without JIT, as with jit=off.
	tar -C / -cf - --exclude='llvmjit*' --exclude=bitcode \
		"usr/lib/postgresql/$want" "usr/share/postgresql/$want" usr/share/zoneinfo usr/lib/locale/C.utf8 |
		tar -C "$root" -xpf -
	# The libraries of every program and module, by the paths the loader
	# finds them at.
	local f
	find "$root/usr/lib/postgresql/$want" -type f -perm -u+x -o -type f -name '*.so' |
		while read -r f; do ldd "/${f#"$root"/}" 2>/dev/null || true; done |
		grep -o '/[^ ]*' | sort -u |
		while read -r f; do cp -L --parents "$f" "$root/"; done
	cat >"$root/etc/passwd" <<-'EOF'
		root:x:0:0:root:/root:/bin/sh
		postgres:x:999:999:PostgreSQL administrator:/var/lib/postgresql:/bin/sh
	EOF
	printf 'root:x:0:\npostgres:x:999:\n' >"$root/etc/group"
	mkdir -p "$root/usr/local/bin" "$root/var/lib/postgresql/data" "$root/var/run/postgresql"
	cp .ci/image/postgres-entrypoint.sh "$root/usr/local/bin/docker-entrypoint.sh"
	chown -R 999:999 "$root/var/lib/postgresql" "$root/var/run/postgresql"
	chmod 0700 "$root/var/lib/postgresql/data"
	chmod 2777 "$root/var/run/postgresql"
	standin_commit "$name" \
		--env "PATH=$pg_bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		--env PGDATA=/var/lib/postgresql/data --env LANG=C.UTF-8 \
		--user postgres --port 5432/tcp --volume /var/lib/postgresql/data \
		--entrypoint '["docker-entrypoint.sh"]' --cmd postgres \
		--stop-signal SIGINT
}
