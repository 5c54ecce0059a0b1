#!/bin/sh
# The entrypoint of the stand-in for the postgres image (standins.sh): the
# part of the real image's docker-entrypoint.sh that compose.yaml relies on.
# On an empty PGDATA it creates the cluster, with POSTGRES_USER (default
# postgres) as its superuser, POSTGRES_PASSWORD as its password, and the
# database POSTGRES_DB (default: the user's name); connections over TCP need
# the password (scram-sha-256), as in the real image.
set -eu
: "${POSTGRES_PASSWORD:?the postgres image needs POSTGRES_PASSWORD}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
		--auth-local=trust --auth-host=scram-sha-256 >/dev/null
	rm -f "$pwfile"
	printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
	printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
	if [ "$db" != postgres ]; then
		printf 'CREATE DATABASE "%s" OWNER "%s";\n' "$db" "$user" |
			postgres --single -D "$PGDATA" -j postgres >/dev/null
	fi
	echo "postgres stand-in: created the cluster in $PGDATA, superuser $user, database $db"
fi
exec "$@"
