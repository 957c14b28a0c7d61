package s3test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// What another application keeps in a bucket it shares with SciMesh, to
// test that SciMesh leaves it alone. Keys are the bucket's own, not under
// a store's prefix.

// bucketOf is the bucket of a blob store URL s3://NAME[/PREFIX]?….
func bucketOf(rawURL string) *string {
	name, _, _ := strings.Cut(strings.TrimPrefix(rawURL, "s3://"), "?")
	name, _, _ = strings.Cut(name, "/")
	return aws.String(name)
}

// Put writes the object key of the bucket of rawURL.
func Put(t testing.TB, rawURL, key string, data []byte) {
	t.Helper()
	_, err := Client(t).PutObject(t.Context(), &s3.PutObjectInput{Bucket: bucketOf(rawURL), Key: aws.String(key), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("s3test: put %s: %v", key, err)
	}
}

// StartUpload begins a multipart upload of key in the bucket of rawURL,
// sends it one part and leaves it unfinished, and returns its ID.
func StartUpload(t testing.TB, rawURL, key string) string {
	t.Helper()
	c, ctx := Client(t), t.Context()
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: bucketOf(rawURL), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("s3test: start an upload of %s: %v", key, err)
	}
	_, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: bucketOf(rawURL), Key: aws.String(key), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("a part"))})
	if err != nil {
		t.Fatalf("s3test: upload a part of %s: %v", key, err)
	}
	return aws.ToString(up.UploadId)
}

// Objects returns the keys of the objects in the bucket of rawURL.
func Objects(t testing.TB, rawURL string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(Client(t), &s3.ListObjectsV2Input{Bucket: bucketOf(rawURL)})
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("s3test: list objects: %v", err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// Uploads returns the unfinished multipart uploads in the bucket of
// rawURL, the key of each by its ID.
func Uploads(t testing.TB, rawURL string) map[string]string {
	t.Helper()
	ups := map[string]string{}
	in := &s3.ListMultipartUploadsInput{Bucket: bucketOf(rawURL)}
	for {
		out, err := Client(t).ListMultipartUploads(t.Context(), in)
		if err != nil {
			t.Fatalf("s3test: list unfinished uploads: %v", err)
		}
		for _, u := range out.Uploads {
			ups[aws.ToString(u.UploadId)] = aws.ToString(u.Key)
		}
		if !aws.ToBool(out.IsTruncated) {
			return ups
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}
