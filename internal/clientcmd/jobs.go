package clientcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/show"
)

func newSubmitCmd() *cobra.Command {
	var (
		cf       clientFlags
		req      client.JobRequest
		params   []string
		noHeader bool
		noCache  bool
		backups  float64
		wait     bool
		output   string
	)
	cmd := &cobra.Command{
		Use:   "submit FILE",
		Args:  argsNamed("the path of a CSV table (or - for standard input)"),
		Short: "Upload a CSV table and create a job over it",
		Long: `submit uploads FILE (a CSV table; "-" reads standard input), creates a job
that scores every row with the workload and keeps the best --top-k rows,
and prints the job's ID. The job is named after FILE's base name unless
--name says otherwise. With --wait it shows the job's progress and writes
the final CSV to --output, or to standard output; 'scimesh wait JOB' does
the same later for a job submitted without --wait.

--param KEY=VALUE passes VALUE to the workload as a string;
--param KEY:=JSON passes a JSON value (a number, true, a list…).`,
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			p, err := parseParams(params)
			if err != nil {
				return err
			}
			req.Parameters = p
			if !cmd.Flags().Changed("name") && args[0] != "-" {
				req.Name = filepath.Base(args[0])
			}
			if noHeader {
				f := false
				req.HasHeader = &f
			}
			if noCache {
				f := false
				req.Cache = &f
			}
			if cmd.Flags().Changed("speculate-after") {
				req.SpeculateAfter = &backups
			}
			return submit(ctx, cmd, c, args[0], &req, wait, output)
		}),
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&req.Workload, "workload", "", "the workload that scores the rows (required)")
	f.StringVar(&req.Name, "name", "", "a name for the job (default: FILE's base name)")
	f.IntVar(&req.TopK, "top-k", 0, "rows to keep (default 100)")
	f.StringVar(&req.ScoreColumn, "score-column", "", `the workload's output column to rank by (default "score")`)
	f.StringVar(&req.Order, "order", "", "desc (higher first, the default) or asc")
	f.IntVar(&req.ChunkRows, "chunk-rows", 0, "rows per chunk (default 10000)")
	f.IntVar(&req.MaxAttempts, "max-attempts", 0, "attempts per chunk before the job fails (default 3)")
	f.IntVar(&req.LeaseSeconds, "lease-seconds", 0, "seconds a worker holds a chunk between heartbeats (default 120)")
	f.IntVar(&req.Priority, "priority", 0, "higher runs first, -1000 to 1000")
	f.StringVar(&req.Workers, "workers", "", `who may run the chunks: "trusted" (the default), "own" (also your worker keys) or "any" (any worker key, with a quorum)`)
	f.IntVar(&req.Quorum, "quorum", 0, `with --workers any: accounts that must agree on an untrusted worker's output, 1-5 (default 2)`)
	f.StringArrayVar(&params, "param", nil, "workload parameter KEY=VALUE (string) or KEY:=JSON; repeatable")
	f.StringSliceVar(&req.Columns, "columns", nil, "input columns the result carries after the scores, comma-separated (joined by --id-column)")
	f.StringVar(&req.IDColumn, "id-column", "", `with --columns: the column, in the input and the outputs, that joins them (default "id")`)
	f.BoolVar(&noHeader, "no-header", false, "the table has no header line")
	f.BoolVar(&noCache, "no-cache", false, "run every chunk, even those whose outputs the coordinator remembers, and remember none")
	f.Float64Var(&backups, "speculate-after", 3, "a chunk leased this many times the median chunk time gets a backup on another worker; 0 for none")
	f.BoolVar(&wait, "wait", false, "wait for the job, show its progress and write its result")
	f.StringVarP(&output, "output", "o", "", "with --wait: write the result here instead of standard output")
	_ = cmd.MarkFlagRequired("workload")
	return cmd
}

// parseParams turns KEY=VALUE and KEY:=JSON flags into a JSON object.
func parseParams(flags []string) (json.RawMessage, error) {
	p, err := domain.ParseParameterPairs(flags)
	if err != nil {
		return nil, fmt.Errorf("--param %w", err)
	}
	return p, nil
}

func submit(ctx context.Context, cmd *cobra.Command, c *client.Client, path string, req *client.JobRequest, wait bool, output string) error {
	in := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("open the table: %w", err)
		}
		defer f.Close()
		in = f
	}
	up, job, err := c.Submit(ctx, in, req)
	if up == nil {
		return fmt.Errorf("upload %s: %w", path, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "uploaded %s: %d rows, %d bytes\n", path, up.Rows, up.Bytes)
	if err != nil {
		return fmt.Errorf("create the job: %w", err)
	}
	if !wait {
		fmt.Fprintln(cmd.OutOrStdout(), job.JobID)
		return nil
	}
	return followJob(ctx, cmd, c, job, output)
}

// followJob shows job's progress until it is final, then writes its result
// to output (standard output when empty). A job that ends failed or
// cancelled is an error that names its status and its error.
func followJob(ctx context.Context, cmd *cobra.Command, c *client.Client, job *client.Job, output string) error {
	fmt.Fprintf(cmd.ErrOrStderr(), "job %s: %d chunks\n", job.JobID, job.Tasks.Total)
	job, err := show.Follow(ctx, c, job.JobID, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if err := job.Err(); err != nil {
		return err
	}
	return writeResult(ctx, cmd, c, job.JobID, output)
}

// writeResult writes job id's final CSV to output, or to standard output
// when output is "".
func writeResult(ctx context.Context, cmd *cobra.Command, c *client.Client, id, output string) error {
	if output == "" {
		return c.SaveResult(ctx, id, cmd.OutOrStdout())
	}
	if err := c.SaveResultFile(ctx, id, output); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "result written to %s\n", output)
	return nil
}

func newWaitCmd() *cobra.Command {
	var (
		cf     clientFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "wait JOB",
		Short: "Follow a job until it ends, then write its result",
		Long: `wait follows JOB, as 'submit --wait' does: it shows the job's progress
until the job ends, then writes the final CSV to --output, or to standard
output. It exits with an error naming the job's error when the job failed
or was cancelled.`,
		Args: argsNamed("a job ID"),
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			job, err := c.GetJob(ctx, args[0])
			if err != nil {
				return err
			}
			return followJob(ctx, cmd, c, job, output)
		}),
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the result here instead of standard output")
	return cmd
}

func newStatusCmd() *cobra.Command {
	var (
		cf     clientFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's status and progress",
		Args:  argsNamed("a job ID"),
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			job, err := c.GetJob(ctx, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(job)
			}
			return show.Job(out, job)
		}),
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the job as JSON")
	return cmd
}

func newJobsCmd() *cobra.Command {
	var (
		cf     clientFlags
		opts   client.ListOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.ListJobs(ctx, opts)
			if err != nil {
				return err
			}
			return printPage(cmd, asJSON, list, list.NextCursor, func(w io.Writer) error { return show.Jobs(w, list.Jobs) })
		}),
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&opts.Status, "status", "", "only jobs of this status: pending, running, completed, failed, cancelled")
	f.StringVar(&opts.Owner, "owner", "", "only the jobs of this account (admins; others see only their own)")
	pageFlags(cmd, "jobs", &opts.Limit, &opts.Cursor, &asJSON)
	return cmd
}

func newResultCmd() *cobra.Command {
	var (
		cf      clientFlags
		output  string
		partial bool
	)
	cmd := &cobra.Command{
		Use:   "result JOB",
		Short: "Download a completed job's final CSV, or with --partial the best rows so far",
		Args:  argsNamed("a job ID"),
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			if partial {
				return writePeek(ctx, cmd, c, args[0], output)
			}
			err := writeResult(ctx, cmd, c, args[0], output)
			if client.IsNotReady(err) {
				return fmt.Errorf("%w\n(a job has a result once 'scimesh status %s' says completed; --partial gives the best rows so far)", err, args[0])
			}
			return err
		}),
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the result here instead of standard output")
	cmd.Flags().BoolVar(&partial, "partial", false, "for a job not yet completed, the best rows over the chunks completed so far")
	return cmd
}

// writePeek writes the best rows of job id so far to output (standard
// output when empty), and says on standard error over how many chunks.
func writePeek(ctx context.Context, cmd *cobra.Command, c *client.Client, id, output string) error {
	p, err := c.PeekResult(ctx, id)
	if err != nil {
		return fmt.Errorf("read the partial result of job %s: %w", id, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "the best rows of %d of %d chunks\n", p.ChunksDone, p.ChunksTotal)
	if output == "" {
		_, err := cmd.OutOrStdout().Write(p.CSV)
		return err
	}
	if err := os.WriteFile(output, p.CSV, 0o644); err != nil {
		return fmt.Errorf("write the partial result: %w", err)
	}
	return nil
}

func newLogsCmd() *cobra.Command {
	var (
		cf     clientFlags
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "logs TASK",
		Short: "Print a task's log; -f follows it until the task is final",
		Args:  argsNamed("a task ID"),
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			rc, err := c.Logs(ctx, args[0], follow)
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.Copy(cmd.OutOrStdout(), rc); err != nil && ctx.Err() == nil {
				return fmt.Errorf("read the log of task %s: %w", args[0], err)
			}
			return nil
		}),
	}
	cf.register(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the task is final")
	return cmd
}

func newCancelCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job and every task of it not yet finished",
		Args:  argsNamed("a job ID"),
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			job, err := c.Cancel(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s is %s\n", job.JobID, job.Status)
			return nil
		}),
	}
	cf.register(cmd)
	return cmd
}

func newRetryCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "retry JOB",
		Short: "Run a failed or cancelled job's unfinished chunks again",
		Long: `Run a failed or cancelled job's unfinished chunks again: its failed and
cancelled chunks go back to pending with a fresh budget of max_attempts,
its completed chunks and their outputs are kept, and the job is pending
again until it completes (or fails) as usual. A job that is pending,
running or completed cannot be retried.`,
		Args: argsNamed("a job ID"),
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			job, err := c.Retry(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s is %s: %d of %d chunks to run again\n",
				job.JobID, job.Status, job.Tasks.Total-job.Tasks.Completed, job.Tasks.Total)
			return nil
		}),
	}
	cf.register(cmd)
	return cmd
}
