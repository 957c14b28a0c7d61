package table_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/scimesh/scimesh/internal/table"
)

func ExampleNormalize() {
	upload := "\ufeff\"id\",\"name\",\"score\"\r\nCHEMBL25,\"aspirin, 100 mg\",0.91\r\n\r\nCHEMBL521,\" ibuprofen\",0.42"
	var normalized bytes.Buffer
	st, err := table.Normalize(&normalized, strings.NewReader(upload))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(normalized.String())
	fmt.Printf("%d rows of %d columns, %d bytes, header %d bytes\n", st.Rows, st.Columns, st.Bytes, st.HeaderBytes)

	_, err = table.Normalize(&normalized, strings.NewReader("id,score\nCHEMBL25,0.91\nCHEMBL521\n"))
	fmt.Println(err)
	_, err = table.Normalize(&normalized, strings.NewReader("id,name\nCHEMBL25,\"aspirin\n"))
	fmt.Println(err)
	// Output:
	// id,name,score
	// CHEMBL25,"aspirin, 100 mg",0.91
	// CHEMBL521," ibuprofen",0.42
	// 3 rows of 3 columns, 74 bytes, header 14 bytes
	// invalid argument: line 3: record has 1 fields; the header has 2
	// invalid argument: line 2, column 10: a quoted field starts here and is not closed by the end of the file
}

func ExampleSplit() {
	normalized := "id,note\na,\"two\nlines\"\nb,x\nc,y\n"
	c, err := table.Split(strings.NewReader(normalized), true, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("header %q, %d rows\n", c.Header, c.Rows)
	for i, ch := range c.Chunks {
		// What the worker of chunk i downloads: the header, then the range.
		download := append(append([]byte{}, c.Header...), normalized[ch.Offset:ch.Offset+ch.Length]...)
		fmt.Printf("chunk %d: %d rows at %d+%d: %q\n", i, ch.Rows, ch.Offset, ch.Length, download)
	}
	_, err = table.Split(strings.NewReader("id,note\n"), true, 2)
	fmt.Println(err)
	// Output:
	// header "id,note\n", 3 rows
	// chunk 0: 2 rows at 8+18: "id,note\na,\"two\nlines\"\nb,x\n"
	// chunk 1: 1 rows at 26+4: "id,note\nc,y\n"
	// invalid argument: the table has a header but no rows
}
