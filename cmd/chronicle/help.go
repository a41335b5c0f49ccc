package main

import (
	"fmt"
	"strings"
)

func runHelp(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	pos, err := c.parse(cmd, fs, args, 0, 2)
	if err != nil {
		return err
	}
	return c.help(pos)
}

// help prints the usage of every command, or of the commands named by
// topic ("history", "task complete").
func (c *cli) help(topic []string) error {
	if len(topic) > 0 {
		if cmd, rest := lookup(topic); cmd != nil && len(rest) == 0 {
			// The command prints its usage and flags.
			return cmd.run(c, cmd, []string{"-h"})
		}
		if subs := group(topic[0]); len(subs) > 0 && len(topic) == 1 {
			for _, cmd := range commands() {
				g, _, _ := strings.Cut(cmd.name, " ")
				if g == topic[0] || g == aliases[topic[0]] {
					c.commandLine(cmd)
				}
			}
			return nil
		}
		return usagef(nil, "no help for %q", strings.Join(topic, " "))
	}
	fmt.Fprintf(c.stdout, "Chronicle inspects and operates a Chronicle store.\n\nusage: %s\n\ncommands:\n", globalUsage)
	for _, cmd := range commands() {
		c.commandLine(cmd)
	}
	fmt.Fprint(c.stdout, `
global flags:
  --store URL    the store: "memory" (default), a postgres:// URL, a
                 mongodb:// URL (its path names the database) or an
                 oracle://user:password@host:port/service URL (a cgo build)
  --schema NAME  the PostgreSQL schema of Chronicle's tables, the MongoDB
                 database of its collections, or the Oracle schema (owner)
  --codec msgpack|json
                 the codec of the deployment's engines (Options.Codec),
                 to show payloads; task results always take the codec
                 their task records
  --search-attributes DECLS
                 the search attributes the deployment declares
                 (Options.SearchAttributes), as name:type,name:type with
                 the types keyword, int, float, bool, time, keyword_list;
                 default $CHRONICLE_SEARCH_ATTRIBUTES. Queries (--where)
                 name them; the demo data declares amount, policy, approved
  --sign-key FILE
                 sign checkpoints with this Ed25519 key ("KEYID BASE64-SEED",
                 made by keygen): checkpoint write, and purge first
  --keys DIR --kek FILE...
                 the data subjects' keys (Options.Keys): the directory of
                 wrapped data keys and the KEK files, the first current
                 ('keys kek' makes one); payloads of data subjects are
                 shown opened, or erased; needed by subject erase
  --json         print JSON for machines (also accepted after the command)

The memory store lives only in this process: it is seeded with demo data
(see 'chronicle demo') before each command, and a command that changes it
(task, dlq redrive/discard, purge, schedule, batch) runs the engine until
its effect shows.
'chronicle ui' serves it in a browser, with the engine running, until it is
interrupted.

exit codes: 0 success, 1 the operation failed or found a problem,
2 a usage error. 'chronicle COMMAND -h' shows a command's flags.
`)
	return nil
}

// commandLine prints a command's usage and summary for help.
func (c *cli) commandLine(cmd *command) {
	fmt.Fprintf(c.stdout, "  %s\n      %s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.summary)
}
