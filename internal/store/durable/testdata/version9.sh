#!/bin/sh
# version9.sh BIN DIR: how version9/ was made, with BIN the binary of the
# build before the bound on ancestors (logs of version 9): a run that
# writes a snapshot and stops cleanly, then a run killed with -9 after
# more writes, groups in groups among them. version9.backup is GET /backup
# of a later start on a copy of DIR.
set -e
BIN=$1; DIR=$2; B=http://127.0.0.1:18939
rm -rf $DIR; mkdir -p $DIR
$BIN -addr 127.0.0.1:18939 -data-dir $DIR -snapshot-bytes 4096 -changes-keep 1000 > $DIR.run1.log 2>&1 & P=$!
until curl -s -o /dev/null $B/groups; do sleep 0.1; done
for i in $(seq 1 150); do curl -s -o /dev/null --data-urlencode "users=[$i,[$((i+1000)),\"N$i\"]]" -d uid=42 $B/group-user/g$((i%7)); done
curl -s -o /dev/null --data-urlencode 'users=[{"uid":4,"ttl":"400h"},{"uid":5,"expires":"2030-01-01T00:00:00Z"}]' $B/group-user/admins
curl -s -o /dev/null -X PUT -H 'Idempotency-Key: key-put-1' --data-urlencode 'users=[1,3,4]' $B/group-user/ops
curl -s -o /dev/null --data-urlencode 'groups=["g1",{"group":"g2","ttl":"300h"}]' -d uid=43 $B/group-group/all
curl -s -o /dev/null -H 'Content-Type: application/json' -d '{"changes":[{"op":"add","group":"bx","users":[7]},{"op":"delete_group","group":"g3"},{"op":"add_groups","group":"staff","groups":["admins","ops"]}]}' $B/batch
curl -s -o /dev/null -X DELETE --data-urlencode 'users=[2]' $B/group-user/g2
kill $P; wait $P || true
$BIN -addr 127.0.0.1:18939 -data-dir $DIR -snapshot-bytes 1000000 -changes-keep 1000 > $DIR.run2.log 2>&1 & P=$!
until curl -s -o /dev/null $B/groups; do sleep 0.1; done
curl -s -o /dev/null --data-urlencode 'users=[{"uid":77,"ttl":"500h"}]' -H 'Idempotency-Key: key-add-77' $B/group-user/late
curl -s -o /dev/null -X PUT -H 'Idempotency-Key: key-nest-1' --data-urlencode 'groups=["g4","g5"]' $B/group-group/all
curl -s -o /dev/null -H 'Content-Type: application/json' -H 'Idempotency-Key: key-batch-1' -d '{"uid":44,"changes":[{"op":"remove_groups","group":"staff","groups":["ops"]},{"op":"add","group":"ops","users":[9]}]}' $B/batch
curl -s -o /dev/null -X DELETE $B/user-group/1
kill -9 $P; wait $P || true
