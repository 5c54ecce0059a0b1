#!/usr/bin/env bash
# make image-check: builds the images of Dockerfile (membership) and
# postgres/Dockerfile (membership-postgres) with buildah, and runs them with
# podman and podman-compose as docs/operating.md and compose.yaml say an
# operator does. It fails when an image does not build, runs as root, has no
# HEALTHCHECK or one that does not report the service's state, gives /data
# other modes than 0700 and the service's owner, does not stop cleanly, or
# loses what it wrote to its volume; and when compose.yaml's two instances do
# not come up healthy on their database and serve each other's writes.
#
# No registry is reachable here: the base images are stand-ins made from this
# machine's files (standins.sh), the builds run with --pull=never and
# --network none, and in --format docker (the OCI format has no HEALTHCHECK).
# podman's storage, configuration, volumes and networks live in a temporary
# directory of this run, removed at exit, with every container. Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
. .ci/image/standins.sh

say() { printf 'image-check: %s\n' "$*"; }
fail() {
	printf 'image-check: FAILED: %s\n' "$*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || fail "needs root, for podman and buildah with their storage in a directory of its own: run it with sudo"
for tool in podman buildah runc podman-compose iptables curl python3 go openssl; do
	command -v "$tool" >/dev/null || fail "$tool is missing: make image-check installs it"
done

# One run at a time on a machine: two would share podman's bridges and the
# addresses of their networks.
exec 9<.ci/image/check.sh
flock -w 900 9 || fail "another make image-check held its lock for 15 minutes"

work=$(mktemp -d /tmp/image-check.XXXXXX)
# podman and buildah use this run's storage and configuration alone (written
# below), never the machine's: the cleanup removes every container and image
# of the storage they name.
export CONTAINERS_CONF="$work/containers.conf" CONTAINERS_STORAGE_CONF="$work/storage.conf"
# Outside the run's own directory, buildah keeps a cache of blobs in
# /var/lib/containers/cache whatever the storage, netavark its addresses in
# /run/containers/networks, and podman, runc and mount their state in /run:
# each of these is removed at exit when this run made it.
made_dirs=()
for dir in /var/lib/containers /run/containers /run/netns /run/runc /run/mount; do
	[ -e "$dir" ] || made_dirs+=("$dir")
done
# netavark adds chains to iptables for its networks and port forwards, and
# leaves its own ones when the last network goes: removed at exit when this
# run added them.
made_chains=
iptables-save 2>/dev/null | grep -q NETAVARK || made_chains=1
project=imagecheck$$

remove_netavark_chains() {
	local table rule chain
	for table in filter nat; do
		iptables -t "$table" -S | grep -e '-j NETAVARK' | grep -v '^-A NETAVARK' | sed 's/^-A/-D/' |
			while read -r rule; do eval "iptables -t $table $rule"; done
		for chain in $(iptables -t "$table" -S | sed -n 's/^-N \(NETAVARK.*\)/\1/p'); do
			iptables -t "$table" -F "$chain"
		done
		for chain in $(iptables -t "$table" -S | sed -n 's/^-N \(NETAVARK.*\)/\1/p'); do
			iptables -t "$table" -X "$chain"
		done
	done
}

# bounded SECONDS COMMAND...: COMMAND under timeout, waited for in the
# background, so that a signal to this script is acted on at once: the
# cleanup stops it.
child=
bounded() {
	local status=0
	timeout "$@" &
	child=$!
	wait "$child" || status=$?
	child=
	return "$status"
}

cleanup() {
	local status=$?
	set +e
	trap - EXIT INT TERM
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null
		wait "$child"
	fi
	if [ -f "$work/compose.log" ] && [ "$status" -ne 0 ]; then
		echo "--- podman-compose's output:" >&2
		tail -n 40 "$work/compose.log" >&2
	fi
	if [ -f "$work/storage.conf" ]; then
		timeout 120 podman-compose -p "$project" -f compose.yaml down -v >/dev/null 2>&1
		timeout 120 podman rm -a -f -t 0 >/dev/null 2>&1
		timeout 60 podman pod rm -a -f >/dev/null 2>&1
		timeout 60 podman volume rm -a -f >/dev/null 2>&1
		timeout 60 podman network prune -f >/dev/null 2>&1
		timeout 60 buildah rm -a >/dev/null 2>&1
		timeout 120 podman rmi -a -f >/dev/null 2>&1
	fi
	# containers/storage leaves its overlay directory mounted on itself.
	awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r -n 1 umount -l
	rm -rf "$work"
	for dir in "${made_dirs[@]}"; do
		case $dir in
		*/containers) rm -rf "$dir" ;;
		# podman mounts /run/netns on itself, as ip netns does.
		/run/netns) [ -n "$(ls -A "$dir")" ] || { umount "$dir" 2>/dev/null; rmdir "$dir"; } ;;
		*) rmdir "$dir" 2>/dev/null ;;
		esac
	done
	[ -z "$made_chains" ] || remove_netavark_chains
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# podman and buildah for this run alone. runc: Debian's podman would take crun
# if it were installed. The limits: podman's default ones are above this
# machine's hard limits, which a container may not raise (no
# CAP_SYS_RESOURCE), and runc then fails with "error setting rlimits"; podman
# lowers its own process limit to 32768.
cat >"$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]

[engine]
runtime = "runc"
tmp_dir = "$work/libpod"

[network]
network_backend = "netavark"
network_config_dir = "$work/networks"
EOF
cat >"$work/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$work/storage"
runroot = "$work/run"
EOF
say "podman $(podman version --format '{{.Client.Version}}'), buildah $(buildah version | awk '/^Version:/ {print $2}'), $(runc --version | head -n 1), podman-compose $(podman-compose version 2>/dev/null | awk '/compose/ { print $NF; exit }')"

# The base images: a stand-in for each image that a FROM line or compose.yaml
# names, tagged with its name.
full_name() {
	case $1 in
	*/*) echo "$1" ;;
	*) echo "docker.io/library/$1" ;;
	esac
}
for image in $(sed -n 's/^FROM \([^ ]*\).*/\1/p' Dockerfile postgres/Dockerfile | sort -u) \
	$(sed -n 's/^ *image: *\(postgres:[^ ]*\) *$/\1/p' compose.yaml); do
	case $image in
	golang:*-bookworm) standin_golang "$(full_name "$image")" ;;
	gcr.io/distroless/static-debian12:nonroot) standin_distroless "$image" ;;
	postgres:*) standin_postgres "$(full_name "$image")" ;;
	*) fail "no stand-in for the image $image: add one to .ci/image/standins.sh" ;;
	esac
done

# build TAG DOCKERFILE: one Go build cache for both builds, mounted for RUN
# steps only (the images do not hold it).
mkdir -p "$work/gocache"
build() {
	local tag=$1 file=$2 t0=$SECONDS
	if ! bounded 900 buildah build --format docker --pull=never --network none \
		-v "$work/gocache:/root/.cache/go-build" -f "$file" -t "$tag" . >"$work/build.log" 2>&1; then
		tail -n 30 "$work/build.log" >&2
		fail "buildah build -f $file"
	fi
	say "built $tag from $file in $((SECONDS - t0)) s: $(podman image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec) ($(podman image inspect --format '{{.Size}}' "$tag") bytes)"
}

# check_config IMAGE BINARY: the exec-form ENTRYPOINT, a HEALTHCHECK, a user.
check_config() {
	local image=$1 binary=$2 entrypoint health user
	entrypoint=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")
	[ "$entrypoint" = "[\"$binary\"]" ] || fail "$image: ENTRYPOINT is $entrypoint, not [\"$binary\"]"
	health=$(podman image inspect --format '{{if .Config.Healthcheck}}{{json .Config.Healthcheck.Test}}{{end}}' "$image")
	[ -n "$health" ] || fail "$image has no HEALTHCHECK (an image built in OCI format drops it)"
	user=$(podman image inspect --format '{{.Config.User}}' "$image")
	say "$image: USER ${user:-(none)}, ENTRYPOINT $entrypoint, HEALTHCHECK $health"
}

# run NAME ARGS...: podman run -d, its output kept for a failure.
run() {
	local name=$1
	shift
	podman run -d --name "$name" "$@" >"$work/run.log" 2>&1 || {
		cat "$work/run.log" >&2
		fail "podman run $name"
	}
}

# show_logs CONTAINER: its last lines, for a failure.
show_logs() {
	echo "--- $1's last log lines:" >&2
	podman logs --tail 20 "$1" >&2 2>&1
}

# last_health CONTAINER: the status and output of its last health check.
last_health() {
	podman inspect --format '{{range .State.Health.Log}}{{printf "exit %d, output %q\n" .ExitCode .Output}}{{end}}' "$1" | tail -n 1
}

# expect_asked CONTAINER ADDRESS [SCHEME]: its last health check asked
# ADDRESS, over SCHEME (http by default).
expect_asked() {
	local last scheme=${3:-http}
	last=$(last_health "$1")
	case $last in
	*"$scheme://$2/"*) ;;
	*) fail "$1: the health check did not ask $scheme://$2: its last run: $last" ;;
	esac
}

# wait_healthy CONTAINER SECONDS: until the image's (or compose.yaml's)
# health check passes, run by hand: podman runs it on a timer only with
# systemd, which this machine does not run.
wait_healthy() {
	local ctr=$1 end=$((SECONDS + $2)) out
	until out=$(timeout 30 podman healthcheck run "$ctr" 2>&1); do
		if [ "$(podman inspect --format '{{.State.Running}}' "$ctr")" != true ]; then
			show_logs "$ctr"
			fail "$ctr stopped before its health check passed"
		fi
		if [ "$SECONDS" -ge "$end" ]; then
			show_logs "$ctr"
			fail "$ctr: the health check $(podman inspect --format '{{json .Config.Healthcheck.Test}}' "$ctr") did not pass within $2 s: $out; its last run: $(last_health "$ctr")"
		fi
		sleep 1
	done
}

# check_user CONTAINER UID: the service's process runs as UID.
check_user() {
	local pid ids
	pid=$(podman inspect --format '{{.State.Pid}}' "$1")
	ids=$(awk '/^Uid:/ { print $2, $3 }' "/proc/$pid/status")
	[ "$ids" = "$2 $2" ] || fail "$1: the service runs as uid $ids (real, effective), not $2"
}

# stop_cleanly CONTAINER: SIGTERM, as docker stop sends, ends it with 0 and
# "stopped" logged, within the 10 s docker stop gives.
stop_cleanly() {
	local t0=$SECONDS code
	# podman's stderr: its complaint that it has no systemd to remove the
	# health check's timer from.
	timeout 60 podman stop -t 10 "$1" >/dev/null 2>&1
	code=$(podman inspect --format '{{.State.ExitCode}}' "$1")
	[ "$code" = 0 ] || {
		show_logs "$1"
		fail "$1 exited with $code on SIGTERM, not 0"
	}
	podman logs "$1" 2>&1 | grep -q 'msg=stopped' || {
		show_logs "$1"
		fail "$1 did not log \"stopped\""
	}
	say "$1: stopped by SIGTERM in $((SECONDS - t0)) s, status 0"
}

# host_port CONTAINER PORT: the loopback port podman published it on.
host_port() {
	podman port "$1" "$2/tcp" | sed -n 's/^127\.0\.0\.1:\([0-9]*\)$/\1/p'
}

# http METHOD URL [CURL ARGS...]: prints "CODE BODY".
http() {
	local method=$1 url=$2 body
	shift 2
	body=$(curl -sS --max-time 10 -X "$method" -o - -w '\n%{http_code}' "$@" "$url") || fail "curl $method $url"
	printf '%s %s\n' "${body##*$'\n'}" "${body%$'\n'*}"
}

# expect WHAT GOT WANT
expect() {
	[ "$2" = "$3" ] || fail "$1: got $2, want $3"
}

token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

# membership: in memory, then on a volume across two containers.
build localhost/membership:image-check Dockerfile
image=localhost/membership:image-check
check_config "$image" /membership
mnt=$(podman image mount "$image")
data=$(stat -c '%a %u:%g' "$mnt/data")
podman image unmount "$image" >/dev/null
expect "/data in the image (mode, owner)" "$data" "700 65532:65532"

run ic-memory -p 127.0.0.1::8080 "$image"
wait_healthy ic-memory 60
check_user ic-memory 65532
port=$(host_port ic-memory 8080)
expect "GET /readyz through the published port" "$(http GET "http://127.0.0.1:$port/readyz")" '200 {"status":"ready"}'
say "ic-memory: healthy, runs as 65532, answers on the published port"
stop_cleanly ic-memory

podman volume create ic-data >/dev/null
run ic-data-1 -p 127.0.0.1::8080 -e MEMBERSHIP_TOKEN="$token" -v ic-data:/data "$image" -data-dir /data
wait_healthy ic-data-1 60
port=$(host_port ic-data-1 8080)
expect "POST without the token" "$(http POST "http://127.0.0.1:$port/group-user/image-check" --data-urlencode 'users=[1,2,3]' | cut -d' ' -f1)" 401
expect "POST with the token" "$(http POST "http://127.0.0.1:$port/group-user/image-check" -H "Authorization: Bearer $token" --data-urlencode 'users=[1,2,3]')" "200 3"
volume=$(podman volume inspect --format '{{.Mountpoint}}' ic-data)
expect "the volume's directory (mode, owner)" "$(stat -c '%a %u:%g' "$volume")" "700 65532:65532"
stop_cleanly ic-data-1
run ic-data-2 -p 127.0.0.1::8080 -v ic-data:/data "$image" -data-dir /data
wait_healthy ic-data-2 60
port=$(host_port ic-data-2 8080)
expect "GET after a restart on the volume" "$(http GET "http://127.0.0.1:$port/group-user/image-check")" \
	'200 [{"uid":1,"nickname":""},{"uid":2,"nickname":""},{"uid":3,"nickname":""}]'
for ctr in ic-data-1 ic-data-2; do
	if podman logs "$ctr" 2>&1 | grep -E 'level=(WARN|ERROR)' | grep -v 'no token'; then
		fail "$ctr logged the warnings above"
	fi
done
say "ic-data-1, ic-data-2: /data 0700 and 65532's in the image and on the volume, no warning; the members written by the first read by the second"
stop_cleanly ic-data-2

# The health check asks the admin listener that MEMBERSHIP_ADMIN_ADDR sets, not
# -addr; without one, it asks 127.0.0.1:8080, and with -addr elsewhere it
# must then fail while the service answers.
run ic-admin -e MEMBERSHIP_ADMIN_ADDR=127.0.0.1:9090 "$image" -addr :8081
wait_healthy ic-admin 60
expect_asked ic-admin 127.0.0.1:9090
run ic-elsewhere -p 127.0.0.1::8081 "$image" -addr :8081
port=$(host_port ic-elsewhere 8081)
end=$((SECONDS + 60))
until [ "$(http GET "http://127.0.0.1:$port/readyz" 2>/dev/null | cut -d' ' -f1)" = 200 ]; do
	[ "$SECONDS" -lt "$end" ] || fail "ic-elsewhere did not answer on its published port within 60 s"
	sleep 1
done
if out=$(timeout 30 podman healthcheck run ic-elsewhere 2>&1); then
	fail "ic-elsewhere: the health check passed, with nothing on 127.0.0.1:8080 ($out)"
fi
expect_asked ic-elsewhere 127.0.0.1:8080
say "ic-admin: healthy through MEMBERSHIP_ADMIN_ADDR with -addr :8081; ic-elsewhere, without it: ready, and its health check $out: $(last_health ic-elsewhere)"
podman rm -f -t 10 ic-admin ic-elsewhere >/dev/null 2>&1

# TLS, as docs/operating.md says to run it: the files in a directory mounted
# read-only, readable by the service's user, named by the variables that the
# health check sees too; it then asks over TLS, trusting that certificate.
tls=$work/tls
mkdir -p "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
	-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$tls/tls.key" -out "$tls/tls.crt" 2>"$work/openssl.log" ||
	fail "openssl req: $(cat "$work/openssl.log")"
chown 65532:65532 "$tls/tls.crt" "$tls/tls.key"
chmod 0400 "$tls/tls.key"
run ic-tls -p 127.0.0.1::8080 -v "$tls:/tls:ro" -e MEMBERSHIP_TLS_CERT=/tls/tls.crt -e MEMBERSHIP_TLS_KEY=/tls/tls.key "$image"
wait_healthy ic-tls 60
expect_asked ic-tls 127.0.0.1:8080 https
port=$(host_port ic-tls 8080)
expect "GET /readyz over TLS through the published port" "$(http GET "https://127.0.0.1:$port/readyz" --cacert "$tls/tls.crt")" '200 {"status":"ready"}'
expect "GET /readyz in clear" "$(http GET "http://127.0.0.1:$port/readyz" | cut -d' ' -f1)" 400
say "ic-tls: healthy through MEMBERSHIP_TLS_CERT and MEMBERSHIP_TLS_KEY, its health check over TLS; HTTPS on the published port"
stop_cleanly ic-tls

# membership-postgres: compose.yaml as it is, its postgres image a stand-in.
build localhost/membership-postgres:latest postgres/Dockerfile
check_config localhost/membership-postgres:latest /membership-postgres
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
t0=$SECONDS
if ! POSTGRES_PASSWORD=$token MEMBERSHIP_TOKEN=$token MEMBERSHIP_1_PORT=$(free_port) MEMBERSHIP_2_PORT=$(free_port) \
	bounded 300 podman-compose -p "$project" -f compose.yaml up -d --no-build >"$work/compose.log" 2>&1; then
	fail "podman-compose up"
fi
container() {
	podman ps -a --filter "label=io.podman.compose.project=$project" --filter "label=com.docker.compose.service=$1" --format '{{.Names}}'
}
db=$(container postgres)
m1=$(container membership-1)
m2=$(container membership-2)
if [ -z "$db" ] || [ -z "$m1" ] || [ -z "$m2" ]; then
	fail "podman-compose up made no containers postgres, membership-1 and membership-2"
fi
wait_healthy "$db" 120
wait_healthy "$m1" 120
wait_healthy "$m2" 60
check_user "$m1" 65532
expect_asked "$m1" 127.0.0.1:9090
say "compose.yaml: $db, $m1 and $m2 healthy $((SECONDS - t0)) s after podman-compose up"
p1=$(host_port "$m1" 8080)
p2=$(host_port "$m2" 8080)
reply=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code} %header{x-revision}' -H "Authorization: Bearer $token" \
	--data-urlencode 'users=[4,5]' "http://127.0.0.1:$p1/group-user/compose") || fail "POST to $m1"
expect "POST to $m1 (status)" "${reply% *}" 200
revision=${reply#* }
expect "GET from $m2 of $m1's write" "$(http GET "http://127.0.0.1:$p2/group-user/compose" -H "X-Min-Revision: $revision")" \
	'200 [{"uid":4,"nickname":""},{"uid":5,"nickname":""}]'
expect "POST to $m2 without the token" "$(http POST "http://127.0.0.1:$p2/group-user/compose" --data-urlencode 'users=[6]' | cut -d' ' -f1)" 401
say "compose.yaml: a write to $m1 (revision $revision) read from $m2; the token asked for"
stop_cleanly "$m1"
bounded 300 podman-compose -p "$project" -f compose.yaml down -v >>"$work/compose.log" 2>&1 || fail "podman-compose down"

say "passed in $SECONDS s"
