#!/bin/sh
# version9.sh BIN DIR: how version9/ was made, with BIN the binary of the
# build before the bound on ancestors (logs of version 9): the writes and
# stops of version8.sh. version9.backup is GET /backup of a later start
# on a copy of DIR.
exec sh "$(dirname "$0")/version8.sh" "$@"
