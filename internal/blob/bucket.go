package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// Bucket is a Store in an S3-compatible bucket, under a prefix. A blob is
// written as a multipart upload that only becomes an object when it is
// completed, so an upload cut short by anything, a kill -9 included, is
// never listed or read; ListTemp lists such unfinished uploads.
type Bucket struct {
	b      *gcblob.Bucket // under the prefix
	client *s3.Client
	name   string
	prefix string // "" or ending in "/"
	where  string // for String
}

var (
	_ Store     = (*Bucket)(nil)
	_ Presigner = (*Bucket)(nil)
)

// Part size and concurrency of a multipart upload: a Writer holds at most
// partBytes × (partConcurrency + 1) in memory, and a blob can be up to
// 10,000 parts (160 GB).
const (
	partBytes       = 16 << 20
	partConcurrency = 3
)

// OpenBucket opens s3://BUCKET[/PREFIX]?endpoint=URL&region=REGION. The
// endpoint is that of an S3-compatible store (addressed by path, as
// MinIO, SeaweedFS and Ceph want it); without one, AWS S3 itself. The
// region defaults to AWS_REGION or the AWS config files, else us-east-1.
// Credentials come from the standard AWS environment variables
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or files
// (~/.aws/credentials, AWS_PROFILE). The bucket must exist and be reachable
// with them: OpenBucket checks.
func OpenBucket(ctx context.Context, rawURL string) (*Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("blobs %q: want s3://BUCKET[/PREFIX]?endpoint=URL&region=REGION", redactURL(rawURL))
	}
	q := u.Query()
	endpoint, region := q.Get("endpoint"), q.Get("region")
	for k := range q {
		if k != "endpoint" && k != "region" {
			return nil, fmt.Errorf("blobs %s: unknown setting %q: only endpoint and region are understood", redactURL(rawURL), k)
		}
	}
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, fmt.Errorf("blobs %s: endpoint %q must be an http:// or https:// URL", redactURL(rawURL), endpoint)
		}
	}
	opts := []func(*config.LoadOptions) error{}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("blobs %s: load the AWS configuration: %w", redactURL(rawURL), err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if endpoint != "" {
		// Stores other than AWS S3 may not know the newer checksums
		// the SDK would add to every request by default.
		cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	})
	name, prefix := u.Host, strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	b, err := s3blob.OpenBucket(ctx, client, name, &s3blob.Options{RequestChecksumCalculation: cfg.RequestChecksumCalculation})
	if err != nil {
		return nil, fmt.Errorf("blobs %s: %w", redactURL(rawURL), err)
	}
	where := "s3://" + name + "/" + prefix
	if endpoint != "" {
		where += " at " + endpoint
	}
	s := &Bucket{b: b, client: client, name: name, prefix: prefix, where: where}
	if prefix != "" {
		s.b = gcblob.PrefixedBucket(b, prefix)
	}
	ok, err := s.b.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("no such bucket")
	}
	if err != nil {
		s.b.Close()
		return nil, fmt.Errorf("blobs %s: the bucket cannot be reached (check the bucket's name, the endpoint, the region and the AWS credentials in the environment): %w", where, err)
	}
	return s, nil
}

// String says which bucket and prefix, at which endpoint.
func (s *Bucket) String() string { return s.where }

// Close releases the bucket.
func (s *Bucket) Close() error { return s.b.Close() }

// wrap words an error of the store, as ErrNotFound for a missing blob.
func (s *Bucket) wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%s in %s: %w", what, s.where, ErrNotFound)
	}
	return fmt.Errorf("%s in %s: %w", what, s.where, err)
}

// Create starts a multipart upload of the blob named key.
func (s *Bucket) Create(ctx context.Context, key string) (Writer, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	// Cancelling the writer's context before Close aborts the upload.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := s.b.NewWriter(wctx, key, &gcblob.WriterOptions{
		ContentType:    "text/csv",
		BufferSize:     partBytes,
		MaxConcurrency: partConcurrency,
	})
	if err != nil {
		cancel()
		return nil, s.wrap(err, "blob: create %s", key)
	}
	return &bucketWriter{s: s, key: key, w: w, cancel: cancel}, nil
}

type bucketWriter struct {
	s      *Bucket
	key    string
	w      *gcblob.Writer
	cancel context.CancelFunc
	n      int64
	done   bool
}

func (w *bucketWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	if err != nil {
		return n, w.s.wrap(err, "blob: write %s", w.key)
	}
	return n, nil
}

// Commit completes the upload: only then is the object there.
func (w *bucketWriter) Commit() (int64, error) {
	if w.done {
		return 0, fmt.Errorf("blob: %s was already committed or aborted", w.key)
	}
	w.done = true
	defer w.cancel()
	if err := w.w.Close(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.s.abortUploads(ctx, w.key) // what the SDK may have left
		return 0, w.s.wrap(err, "blob: commit %s", w.key)
	}
	return w.n, nil
}

// Abort cancels the upload and has the store discard the parts sent. The
// SDK's own abort of a cancelled upload is sent with the cancelled
// context, so it is done again here; whatever is left is swept later as a
// leftover (ListTemp).
func (w *bucketWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.cancel()
	_ = w.w.Close() // reports the cancellation
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = w.s.abortUploads(ctx, w.key)
}

// abortUploads aborts the unfinished multipart uploads of key.
func (s *Bucket) abortUploads(ctx context.Context, key string) error {
	return s.eachUploads(ctx, s.prefix+key, func(ups []upload) error {
		for _, up := range ups {
			if up.key == key {
				if err := s.RemoveTemp(ctx, up.name()); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// OpenRange reads a byte range of the object named key.
func (s *Bucket) OpenRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if length < 0 {
		length = -1
	}
	r, err := s.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, s.wrap(err, "blob: read %s", key)
	}
	return r, nil
}

// PresignRange signs a GET of length bytes of key from offset, valid for
// expiry; the signature covers the Range header, so the URL reads that
// range and no other.
func (s *Bucket) PresignRange(ctx context.Context, key string, offset, length int64, expiry time.Duration) (*SignedRange, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if length <= 0 {
		return nil, fmt.Errorf("blob: presign %s: a range of %d bytes", key, length)
	}
	rng := byteRange(offset, length)
	u, err := s.b.SignedURL(ctx, key, &gcblob.SignedURLOptions{
		Method: http.MethodGet,
		Expiry: expiry,
		BeforeSign: func(as func(any) bool) error {
			var in *s3.GetObjectInput
			if !as(&in) {
				return errors.New("not an S3 GetObject")
			}
			in.Range = aws.String(rng)
			return nil
		},
	})
	if err != nil {
		return nil, s.wrap(err, "blob: presign %s", key)
	}
	return &SignedRange{URL: u, Range: rng}, nil
}

// List lists the objects under the prefix named as blobs.
func (s *Bucket) List(ctx context.Context, fn func(page []Info) error) error {
	it := s.b.List(&gcblob.ListOptions{Delimiter: "/"})
	page := make([]Info, 0, listPage)
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s.wrap(err, "blob: list")
		}
		if o.IsDir || checkKey(o.Key) != nil {
			continue // not one of ours
		}
		page = append(page, Info{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
		if len(page) == listPage {
			if err := fn(page); err != nil {
				return err
			}
			page = make([]Info, 0, listPage)
		}
	}
	if len(page) > 0 {
		return fn(page)
	}
	return nil
}

// Remove deletes the object named key.
func (s *Bucket) Remove(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := s.b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return s.wrap(err, "blob: remove %s", key)
	}
	return nil
}

// tempSep joins an unfinished upload's key and ID into its leftover name.
const tempSep = "?upload="

// ListTemp lists the unfinished multipart uploads of blobs under the
// prefix.
func (s *Bucket) ListTemp(ctx context.Context, fn func(page []Info) error) error {
	return s.eachUploads(ctx, s.prefix, func(ups []upload) error {
		page := make([]Info, 0, len(ups))
		for _, up := range ups {
			at, err := s.lastWritten(ctx, up.MultipartUpload)
			if err != nil {
				return err
			}
			page = append(page, Info{Key: up.name(), ModTime: at})
		}
		return fn(page)
	})
}

// upload is an unfinished multipart upload of the blob key.
type upload struct {
	types.MultipartUpload
	key string
}

// name is the upload's leftover name, as RemoveTemp takes it.
func (u upload) name() string { return u.key + tempSep + aws.ToString(u.UploadId) }

// eachUploads calls fn with the unfinished multipart uploads of blobs
// whose full keys start with prefix, a page of the listing at a time.
func (s *Bucket) eachUploads(ctx context.Context, prefix string, fn func([]upload) error) error {
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.name), Prefix: aws.String(prefix)}
	for {
		out, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return s.wrap(err, "blob: list unfinished uploads")
		}
		var ups []upload
		for _, up := range out.Uploads {
			key := strings.TrimPrefix(aws.ToString(up.Key), s.prefix)
			if checkKey(key) == nil && aws.ToString(up.UploadId) != "" {
				ups = append(ups, upload{up, key})
			}
		}
		if len(ups) > 0 {
			if err := fn(ups); err != nil {
				return err
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// lastWritten is when an unfinished upload was last written to: when its
// last part came, or when it began if none did. A long upload is young
// however long ago it began, so that a sweep does not abort it.
func (s *Bucket) lastWritten(ctx context.Context, up types.MultipartUpload) (time.Time, error) {
	at := aws.ToTime(up.Initiated)
	in := &s3.ListPartsInput{Bucket: aws.String(s.name), Key: up.Key, UploadId: up.UploadId}
	for {
		out, err := s.client.ListParts(ctx, in)
		if isNoSuchUpload(err) {
			return at, nil // finished or aborted meanwhile
		}
		if err != nil {
			return time.Time{}, s.wrap(err, "blob: list the parts of an unfinished upload of %s", aws.ToString(up.Key))
		}
		for _, p := range out.Parts {
			if t := aws.ToTime(p.LastModified); t.After(at) {
				at = t
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return at, nil
		}
		in.PartNumberMarker = out.NextPartNumberMarker
	}
}

// RemoveTemp aborts the unfinished upload name (as ListTemp gives it).
func (s *Bucket) RemoveTemp(ctx context.Context, name string) error {
	key, id, ok := strings.Cut(name, tempSep)
	if !ok || id == "" || checkKey(key) != nil {
		return fmt.Errorf("blob: unfinished upload %q: %w", name, ErrNotFound)
	}
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(s.name), Key: aws.String(s.prefix + key), UploadId: aws.String(id),
	})
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound && !isNoSuchUpload(err) {
		return s.wrap(err, "blob: abort the unfinished upload of %s", key)
	}
	return nil
}

func isNoSuchUpload(err error) bool {
	var nsu interface{ ErrorCode() string }
	return errors.As(err, &nsu) && nsu.ErrorCode() == "NoSuchUpload"
}
