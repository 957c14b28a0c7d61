package show

import (
	"fmt"
	"io"
	"strings"

	"github.com/scimesh/scimesh/internal/client"
)

// pool shows the worker account of the installation's own workers, "" in
// the API; no account name has parentheses.
const pool = "(pool)"

// WorkerKeys writes a table of worker keys, a row each.
func WorkerKeys(w io.Writer, keys []*client.WorkerKey) error {
	tw := table(w)
	fmt.Fprintln(tw, "ACCOUNT\tNAME\tTRUSTED\tCREATED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Account, k.Name, yesNo(k.Trusted), instant(k.CreatedAt))
	}
	return tw.Flush()
}

// Workers writes a table of workers, a row each: the pool's as account
// (pool), and a worker that names no workload as running any.
func Workers(w io.Writer, workers []client.Worker) error {
	tw := table(w)
	fmt.Fprintln(tw, "ID\tACCOUNT\tKEY\tTRUSTED\tWORKLOADS\tLAST SEEN\tTASKS DONE")
	for _, wk := range workers {
		account, key, workloads := wk.Account, wk.Key, strings.Join(wk.Workloads, ",")
		if account == "" {
			account, key = pool, "-"
		}
		if workloads == "" {
			workloads = "any"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", wk.ID, account, key, yesNo(wk.Trusted), workloads, instant(wk.LastSeen), wk.TasksDone)
	}
	return tw.Flush()
}

// KeyTrust writes the trust k has, in a line.
func KeyTrust(w io.Writer, k *client.WorkerKey) {
	fmt.Fprintf(w, "worker key %s/%s: trusted %s\n", k.Account, k.Name, yesNo(k.Trusted))
}
