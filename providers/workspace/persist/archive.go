package persist

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// archiveCompression is the gzip level of new archives.
const archiveCompression = gzip.BestSpeed

// writeArchive writes the snapshot in dir (entries es) as a tar.gz file:
// a root entry "./", then "./<path>" entries (directories with a trailing
// slash) in snapshot order, with permission bits and modification times and
// no owner information. It returns the file's SHA-256 (hex) and size,
// which the index pins.
func writeArchive(ctx context.Context, dir string, es []entry, file string) (sum string, size int64, err error) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	h := &countingHash{h: sha256.New()}
	bw := bufio.NewWriterSize(io.MultiWriter(f, h), 256<<10)
	err = writeTar(ctx, dir, es, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.h.Sum(nil)), h.n, nil
}

// countingHash hashes and counts what is written to it.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// writeTar writes the gzip-compressed tar stream of writeArchive to bw.
func writeTar(ctx context.Context, dir string, es []entry, bw io.Writer) error {
	gz, err := gzip.NewWriterLevel(bw, archiveCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, ModTime: now}); err != nil {
		return err
	}
	buf := make([]byte, 256<<10)
	for _, e := range es {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		mt := e.ModTime
		if mt.IsZero() {
			mt = now
		}
		h := &tar.Header{Name: "./" + e.Path, Mode: int64(e.Mode.Perm()), ModTime: mt}
		if e.Type == typeDir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, e.Size
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		in, err := os.Open(filepath.Join(dir, filepath.FromSlash(e.Path)))
		if err != nil {
			return err
		}
		n, err := io.CopyBuffer(tw, io.LimitReader(in, e.Size), buf)
		var more [1]byte
		grew, _ := in.Read(more[:])
		in.Close()
		if err != nil {
			return err
		}
		if n != e.Size || grew > 0 {
			// The snapshot may be a hard link to a file being modified.
			return fmt.Errorf("%q changed during the save (save again)", e.Path)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// storageReadError marks errors of the storage body, so that they are not
// mistaken for archive corruption.
type storageReadError struct{ err error }

func (e *storageReadError) Error() string { return e.err.Error() }
func (e *storageReadError) Unwrap() error { return e.err }

// boundedReader reads a storage body, failing past max bytes and once ctx
// is done; its own errors are *storageReadError.
type boundedReader struct {
	ctx  context.Context
	r    io.Reader
	n    int64
	max  int64
	what string
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.ctx.Err() != nil {
		return 0, &storageReadError{context.Cause(b.ctx)}
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		return n, &storageReadError{limitf("%s exceeds %d bytes", b.what, b.max)}
	}
	if err != nil && err != io.EOF {
		err = &storageReadError{err}
	}
	return n, err
}

// readerError classifies an error met while decoding: storage and local
// errors pass through, decoding errors become corruption.
func readerError(workspaceID, objectPath string, err error) error {
	var se *storageReadError
	if errors.As(err, &se) {
		return se.err
	}
	return corrupt(workspaceID, objectPath, "%v", err)
}

// extractArchive validates and extracts a tar.gz body into dir (which
// exists and is empty). Only directories and regular files with safe paths
// are accepted, each once, within lim; anything else is corruption (or a
// limit error). Files are written 0600 and directories 0700; the recorded
// modes are returned in the entries for applyModes.
func extractArchive(ctx context.Context, body io.Reader, dir string, lim limits, maxArchive int64, workspaceID, objectPath string) ([]entry, error) {
	br := &boundedReader{ctx: ctx, r: body, max: maxArchive, what: "workspace archive"}
	gz, err := gzip.NewReader(bufio.NewReaderSize(br, 256<<10))
	if err != nil {
		return nil, readerError(workspaceID, objectPath, fmt.Errorf("not a gzip stream: %w", err))
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	var (
		out     []entry
		kinds   = map[string]string{}
		count   int
		total   int64
		sawRoot bool
		buf     = make([]byte, 256<<10)
	)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, readerError(workspaceID, objectPath, err)
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." {
			if h.Typeflag != tar.TypeDir || sawRoot {
				return nil, corrupt(workspaceID, objectPath, "invalid archive root entry %q", h.Name)
			}
			sawRoot = true
			count++
			if count > lim.maxEntries {
				return nil, limitf("workspace archive exceeds %d entries", lim.maxEntries)
			}
			continue
		}
		if err := validateEntryPath(name); err != nil {
			return nil, corrupt(workspaceID, objectPath, "archive entry: %v", err)
		}
		if _, dup := kinds[name]; dup {
			return nil, corrupt(workspaceID, objectPath, "archive lists %q twice", name)
		}
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if kinds[p] == typeFile {
				return nil, corrupt(workspaceID, objectPath, "archive entry %q is below the file %q", name, p)
			}
		}
		count++
		if count > lim.maxEntries {
			return nil, limitf("workspace archive exceeds %d entries", lim.maxEntries)
		}
		if h.Mode < 0 || h.Mode&^0o7777 != 0 {
			return nil, corrupt(workspaceID, objectPath, "archive entry %q has invalid mode %o", name, h.Mode)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		e := entry{Path: name, Mode: os.FileMode(h.Mode).Perm(), ModTime: h.ModTime}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Type = typeDir
			if err := os.MkdirAll(target, 0o700); err != nil {
				return nil, err
			}
		case tar.TypeReg: // archive/tar reads the legacy TypeRegA as TypeReg
			e.Type, e.Size = typeFile, h.Size
			if h.Size < 0 {
				return nil, corrupt(workspaceID, objectPath, "archive entry %q has a negative size", name)
			}
			total += h.Size
			if total > lim.maxBytes {
				return nil, limitf("workspace archive exceeds %d extracted bytes", lim.maxBytes)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				return nil, err
			}
			if err := writeEntry(tr, target, h.Size, buf); err != nil {
				return nil, readerError(workspaceID, objectPath, err)
			}
		default:
			return nil, corrupt(workspaceID, objectPath, "archive entry %q has unsupported type %q", name, string(h.Typeflag))
		}
		kinds[name] = e.Type
		out = append(out, e)
	}
	// Read to the end of the gzip stream so that its checksum is verified.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return nil, readerError(workspaceID, objectPath, err)
	}
	if count == 0 {
		return nil, corrupt(workspaceID, objectPath, "archive has no entries")
	}
	sortEntries(out)
	return out, nil
}

// localError marks local filesystem errors met while writing an entry.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// writeEntry writes exactly size bytes of r into a new file.
func writeEntry(r io.Reader, target string, size int64, buf []byte) error {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &storageReadError{&localError{err}}
	}
	n, err := io.CopyBuffer(onlyWriter{f}, io.LimitReader(r, size), buf)
	if cerr := f.Close(); err == nil && cerr != nil {
		return &storageReadError{&localError{cerr}}
	}
	if err != nil {
		var le *localError
		if errors.As(err, &le) {
			return &storageReadError{err}
		}
		return err
	}
	if n != size {
		return fmt.Errorf("entry %q is truncated", filepath.Base(target))
	}
	return nil
}

// onlyWriter hides ReaderFrom and tags write errors as local.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		err = &localError{err}
	}
	return n, err
}
