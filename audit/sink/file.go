package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/replayguard/replayguard/engine"
)

// DefaultKeep is how many rotated files File keeps when FileOptions.Keep is 0.
const DefaultKeep = 5

// FileOptions configure NewFile.
type FileOptions struct {
	// Path is the file the records are appended to.
	Path string
	// MaxBytes rotates the file before a write would take it past this
	// size: Path becomes Path.1, Path.1 becomes Path.2, and so on. Default
	// 0: no rotation.
	MaxBytes int64
	// Keep is how many rotated files stay; the oldest beyond it is
	// removed. Default DefaultKeep.
	Keep int
}

// File appends each record as one line of JSON, the audit export format,
// and syncs the file before a batch counts as delivered. A write that fails
// (the disk full) is cut back off the file, whole lines and all, since the
// sink writes its records again from its cursor. A batch a crash cut short
// leaves a last line without its newline; the next open cuts that partial
// line off before appending, so that no record is glued to it, and the
// records of the batch before it, whole lines already in the file, are not
// written a second time; nor are those a crash inside a rotation left in
// Path.1, the new Path still empty. A file another tool renamed or removed
// (logrotate) is noticed before the next batch, which goes to a new Path.
type File struct {
	opts FileOptions
	f    *os.File
	size int64
	buf  []byte
	// last is the file's last record as open found it (Path.1's when
	// Path is empty): a batch a crash cut short after whole lines comes
	// again from the cursor, and its records up to this one (same chain,
	// position and hash) are in the files already.
	last *engine.AuditRecord
}

// NewFile returns a file exporter; it opens the file on the first Export.
func NewFile(o FileOptions) *File {
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	return &File{opts: o}
}

// CheckFile says why a File on path could not append its records, nil
// when it can: path is a regular file it may open for writing, or is
// absent from a directory it may create files in. It leaves path as it
// found it.
func CheckFile(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	st, err = os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A file created and removed at once: whether the directory
		// takes new files (permissions, a read-only mount) is what
		// creating one says.
		f, err := os.CreateTemp(dir, ".replayguard-check-*")
		if err != nil {
			return fmt.Errorf("cannot create %s: %w", path, pathCause(err))
		}
		f.Close()
		return os.Remove(f.Name())
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("cannot append to %s: %w", path, pathCause(err))
	}
	return f.Close()
}

// pathCause is err without the operation and path a *fs.PathError adds
// (the message names the path itself).
func pathCause(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// Export appends recs and syncs the file. A file is rotated between two
// records, so none but one holding a single larger record passes MaxBytes.
func (w *File) Export(_ context.Context, recs []engine.AuditRecord) error {
	w.reopenIfMoved()
	if err := w.open(); err != nil {
		return err
	}
	recs = w.notWritten(recs)
	w.buf = w.buf[:0]
	for i := range recs {
		line, err := engine.AppendRecordJSON(w.buf, &recs[i])
		if err != nil {
			return fmt.Errorf("encode record %d: %w", recs[i].Position, err)
		}
		line = append(line, '\n')
		n := int64(len(line) - len(w.buf))
		if m := w.opts.MaxBytes; m > 0 && w.size+int64(len(w.buf))+n > m && w.size+int64(len(w.buf)) > 0 {
			if err := w.write(w.buf); err != nil {
				return err
			}
			if err := w.rotate(); err != nil {
				return err
			}
			line = append(line[:0], line[len(w.buf):]...)
		}
		w.buf = line
	}
	return w.write(w.buf)
}

// write appends b and syncs the file.
func (w *File) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, err := w.f.Write(b)
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		// A write cut short (the disk full) or not synced may have left
		// whole lines of records the cursor does not count delivered: cut
		// the file back to where this write began, so that the retry from
		// the cursor writes each of them once. Where the file cannot be
		// cut (append-only), the next open ends the partial line.
		if n > 0 && w.f.Truncate(w.size) == nil {
			w.f.Sync()
		}
		w.f.Close()
		w.f = nil // reopened, and its size read again, by the next Export
		return fmt.Errorf("audit file %s: %w", w.opts.Path, err)
	}
	w.size += int64(n)
	return nil
}

func (w *File) open() error {
	if w.f != nil {
		return nil
	}
	f, err := os.OpenFile(w.opts.Path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit file: %w", err)
	}
	size, err := dropPartialLine(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("audit file %s: %w", w.opts.Path, err)
	}
	last, err := lastRecord(f, size)
	if err == nil && size == 0 && w.opts.MaxBytes > 0 {
		// A crash inside a rotation, after the rename and before the new
		// file's first write, left the batch's first records in path.1.
		last, err = lastRotated(w.opts.Path + ".1")
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("audit file %s: %w", w.opts.Path, err)
	}
	w.f, w.size, w.last = f, size, last
	return nil
}

// lastRotated returns the last record of the rotated file path; nil when
// there is none.
func lastRotated(path string) (*engine.AuditRecord, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	end, err := lastLineEnd(f, st.Size())
	if err != nil {
		return nil, err
	}
	return lastRecord(f, end)
}

// reopenIfMoved closes the file when Path no longer names it: another
// tool renamed or removed it (logrotate), and records written to it would
// go wherever it went, lost with it once it is compressed or deleted. The
// next open opens Path again.
func (w *File) reopenIfMoved() {
	if w.f == nil {
		return
	}
	open, err := w.f.Stat()
	if err != nil {
		return // the write says what is wrong
	}
	if at, err := os.Stat(w.opts.Path); err == nil && os.SameFile(open, at) {
		return
	}
	w.f.Close()
	w.f = nil
}

// notWritten returns recs without those up to the file's last record, when
// recs hold it: they were written before a crash that kept the cursor from
// moving. Records of another chain, or of this one after it, are all kept.
// A batch holds one chain's records; the batches of other chains that come
// first after a crash leave the last record to the first batch of its own.
func (w *File) notWritten(recs []engine.AuditRecord) []engine.AuditRecord {
	if w.last == nil || len(recs) == 0 || recs[0].Member != w.last.Member {
		return recs
	}
	l := w.last
	w.last = nil // records after it are new: only the chain's first batch can repeat
	for i := range recs {
		if r := &recs[i]; r.Member == l.Member && r.Position == l.Position && r.Hash == l.Hash {
			return recs[i+1:]
		}
	}
	return recs
}

// lastRecord decodes the last line of f's first size bytes, which end with
// a newline; nil when f is empty or the line is no record.
func lastRecord(f *os.File, size int64) (*engine.AuditRecord, error) {
	if size == 0 {
		return nil, nil
	}
	start, err := lastLineEnd(f, size-1)
	if err != nil {
		return nil, err
	}
	line := make([]byte, size-1-start)
	if _, err := f.ReadAt(line, start); err != nil {
		return nil, err
	}
	var rec engine.AuditRecord
	if json.Unmarshal(line, &rec) != nil {
		return nil, nil
	}
	return &rec, nil
}

// dropPartialLine cuts off f's last line when it has no newline, the rest
// of a write cut short, and returns f's size after it.
func dropPartialLine(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	end, err := lastLineEnd(f, size)
	if err != nil || end == size {
		return size, err
	}
	if err := f.Truncate(end); err != nil {
		if !errors.Is(err, fs.ErrPermission) {
			return 0, err
		}
		// Append-only (chattr +a): the partial line stays, ended, so
		// that the next record starts a line of its own.
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
		return size + 1, f.Sync()
	}
	return end, f.Sync()
}

// lastLineEnd returns the offset just past the last newline in f's first
// size bytes; 0 when there is none.
func lastLineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, 32<<10)
	for end := size; end > 0; {
		n := min(end, int64(len(buf)))
		if _, err := f.ReadAt(buf[:n], end-n); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// rotate shifts Path.k to Path.k+1 (dropping the one beyond Keep), Path to
// Path.1, and opens a new Path.
func (w *File) rotate() error {
	p := w.opts.Path
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("audit file %s: %w", p, err)
	}
	w.f = nil
	if err := os.Remove(p + "." + strconv.Itoa(w.opts.Keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("audit file rotation: %w", err)
	}
	for k := w.opts.Keep - 1; k >= 1; k-- {
		from := p + "." + strconv.Itoa(k)
		if err := os.Rename(from, p+"."+strconv.Itoa(k+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("audit file rotation: %w", err)
		}
	}
	if err := os.Rename(p, p+".1"); err != nil {
		return fmt.Errorf("audit file rotation: %w", err)
	}
	syncDir(filepath.Dir(p))
	return w.open()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Close closes the file.
func (w *File) Close(context.Context) error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
