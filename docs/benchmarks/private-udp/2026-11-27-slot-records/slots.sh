#!/bin/sh
# Like the shoal-private preset: the database (users, torrents registered in the first
# round) stays; the state file and the ledger file beside it go, so each round starts
# with empty swarms.
rm -f /tmp/s17/slots.state /tmp/s17/slots.state.ledger
exec /tmp/s17/shoal-slots "$@"
