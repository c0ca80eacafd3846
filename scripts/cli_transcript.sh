#!/usr/bin/env bash
# A scripted set of `hermes` commands in a fresh home, every output (stdout, stderr, exit
# status) in one transcript: run it on two trees and diff the transcripts to show a change
# leaves the command line's behaviour byte for byte (the house moves: issue 34).
#
#   scripts/cli_transcript.sh TREE OUT      # TREE: a checkout of hermes; OUT: the transcript
#
# The clock is pinned with faketime, so timestamps agree between runs.
set -u
tree=$(cd "$1" && pwd); out=$2
python=${PYTHON:-$(dirname "$0")/../.venv/bin/python}
home=$(mktemp -d); trap 'rm -rf "$home" "$home.out"' EXIT
export HERMES_HOME=$home PYTHONPATH=$tree NO_COLOR=1 COLUMNS=100 TERM=dumb
: >"$out"
n=0
run() {
  n=$((n + 1))
  printf '$ hermes %s\n' "$*" | sed -e "s|$tree|<tree>|g" >>"$out"
  # -f: a frozen clock (one second later for each command), not one that starts there
  faketime -f "2026-12-01 10:$(printf '%02d:%02d' $((n / 60)) $((n % 60)))" \
    "$python" -m hermes "$@" >"$home.out" 2>&1
  status=$?
  sed -e "s|$home|<home>|g" -e "s|$tree|<tree>|g" "$home.out" >>"$out"
  printf '[exit %s]\n' "$status" >>"$out"
}
run memory show
run memory add "Prefers tea over coffee"
run memory add "Lives in Lisbon" --json
run memory add "Prefers tea over coffee"
run memory show --json
run memory replace "Lisbon" "Lives in Porto"
run memory remove 1 --json
run memory show
run facts add "Alice runs the Redis cluster for Initech" -e Alice -e Redis --category project
run facts add "Alice runs the redis cluster for Initech."
run facts add "Bob maintains the Postgres replica at Initech" -e Bob -e Postgres -e Initech --json
run facts add "The user's cat is called Miso" --tag pets
run facts add "api key sk-abcdefabcdefabcdefabcdefabcdef1234"
run facts search redis
run facts search redis --json
run facts search "who runs postgres" --explain
run facts search "   "
run facts search initech --category nonsense
run facts probe Alice
run facts probe Alice --json
run facts probe ""
run facts reason Alice Bob
run facts reason Alice Bob --json
run facts rate 1 helpful
run facts rate 2 unhelpful --json
run facts show 1
run facts show 1 --json
run facts update 1 "Alice runs the Redis cluster for Initech since 2025" --note "date"
run facts update 3 "Miso" --json
run facts forget 2 --reason "wrong"
run facts forget 99
run facts restore 2 --json
run facts list
run facts list --all --json
run facts entities
run facts alias Alice Ali --json
run facts history 1
run facts history 4 --json
run facts purge 3 --yes
run sessions import "$tree/scripts/example_transcripts.jsonl"
run sessions list
run sessions list --json
run sessions list --source discord --since 2026-11-01
run sessions search "docker network"
run sessions search "docker network" --json
run sessions search "zzzz-no-such-word"
run sessions show 1
run sessions show 1 --json
run sessions show 1 --around 2 -C 1
run sessions show 999
run context show
run db stats
run stats --json
run export --user owner
