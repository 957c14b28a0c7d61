package table_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/table"
)

func ExampleParseOutput() {
	out, err := table.ParseOutput([]byte("id,score\nCHEMBL25,0.91\nCHEMBL521,0.42\n"), "score", 100)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Header, out.ScoreIndex, out.Rows, out.Scores)

	_, err = table.ParseOutput([]byte("id,score\nCHEMBL25,high\n"), "score", 100)
	fmt.Println(err)
	// Output:
	// [id score] 1 [[CHEMBL25 0.91] [CHEMBL521 0.42]] [0.91 0.42]
	// invalid argument: output line 2: score "high" in column "score" is not a number
}

func ExampleMerge() {
	chunks := []table.ChunkOutput{
		{Index: 1, Data: []byte("id,score\nc,0.9\nd,0.5\n")},
		{Index: 0, Data: []byte("\"id\",\"score\"\r\na,0.9\r\nb,0.7\r\n")},
	}
	rows, err := table.Merge(os.Stdout, chunks, "score", domain.Desc, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rows, "rows")
	// Output:
	// id,score
	// a,0.9
	// c,0.9
	// b,0.7
	// 3 rows
}

func ExampleTopK() {
	// A worker keeps the best 2 rows of its command's output as it streams.
	output := strings.NewReader("\ufeffid,score\r\nCHEMBL25,0.42\r\nCHEMBL521,0.91\r\nCHEMBL6,0.42\r\n")
	tk, err := table.NewTopK("score", domain.Desc, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	best, err := tk.Select(output)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(best.RowsRead, "rows read")
	if err := best.WriteCSV(os.Stdout); err != nil {
		fmt.Println(err)
	}

	_, err = tk.Select(strings.NewReader("id,score\nCHEMBL25,high\n"))
	fmt.Println(err)
	// Output:
	// 3 rows read
	// id,score
	// CHEMBL521,0.91
	// CHEMBL25,0.42
	// invalid argument: output line 2: score "high" in column "score" is not a number
}
