package show

import (
	"fmt"
	"io"
	"strconv"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
)

// Account writes a, one setting a line, with its use when it has it.
func Account(w io.Writer, a *client.Account) error {
	tw := table(w)
	fmt.Fprintf(tw, "name\t%s\n", a.Name)
	fmt.Fprintf(tw, "admin\t%s\n", yesNo(a.Admin))
	fmt.Fprintf(tw, "disabled\t%s\n", yesNo(a.Disabled))
	fmt.Fprintf(tw, "weight\t%d\n", a.Weight)
	running, jobs, storage := "", "", ""
	if u := a.Usage; u != nil {
		running = fmt.Sprintf(" (%d running now)", u.Running)
		jobs = fmt.Sprintf(" (%d unfinished now)", u.Jobs)
		storage = fmt.Sprintf(" (%s used now)", domain.SizeText(u.StorageBytes))
	}
	fmt.Fprintf(tw, "max_running\t%s%s\n", limit(int64(a.MaxRunning), strconv.Itoa(a.MaxRunning)), running)
	fmt.Fprintf(tw, "max_jobs\t%s%s\n", limit(int64(a.MaxJobs), strconv.Itoa(a.MaxJobs)), jobs)
	fmt.Fprintf(tw, "max_storage\t%s%s\n", limit(a.MaxStorage, domain.SizeText(a.MaxStorage)), storage)
	fmt.Fprintf(tw, "created\t%s\n", instant(a.CreatedAt))
	fmt.Fprintf(tw, "updated\t%s\n", instant(a.UpdatedAt))
	return tw.Flush()
}

// Accounts writes a table of accounts, a row each.
func Accounts(w io.Writer, list []*client.Account) error {
	tw := table(w)
	fmt.Fprintln(tw, "NAME\tADMIN\tDISABLED\tWEIGHT\tMAX_RUNNING\tMAX_JOBS\tMAX_STORAGE\tCREATED")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.Name, yesNo(a.Admin), yesNo(a.Disabled), a.Weight,
			limit(int64(a.MaxRunning), strconv.Itoa(a.MaxRunning)), limit(int64(a.MaxJobs), strconv.Itoa(a.MaxJobs)),
			limit(a.MaxStorage, domain.SizeText(a.MaxStorage)), instant(a.CreatedAt))
	}
	return tw.Flush()
}

// limit writes a quota: "none" for 0, else text.
func limit(n int64, text string) string {
	if n == 0 {
		return "none"
	}
	return text
}
