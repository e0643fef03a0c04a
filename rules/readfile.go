package rules

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// maxReadTime bounds how long [ReadFile] (and so [LoadFile] and
// [Live.ReloadFile]) waits for a rules file: a file on a hung network
// file system fails the load after it instead of blocking the reload, and
// every later one, forever.
const maxReadTime = 5 * time.Second

// readTimeout is maxReadTime, and read is readRegular; tests replace
// them to simulate a hung file system.
var (
	readTimeout = maxReadTime
	read        = readRegular
)

// reading holds the paths whose read has not returned yet (a hung file
// system): a later read of one is refused at once rather than stacking a
// goroutine per reload.
var reading sync.Map

// ReadFile reads a rules file for [LoadFile]: only a regular file (a
// symbolic link to one is followed), of at most 4 MiB,
// within 5 seconds. A FIFO, a device, a socket or a directory is
// refused without being read (reading a FIFO blocks until a writer comes,
// a device may never end), as is a larger file; the error says what was
// refused and why. While an earlier read of path has not returned (the
// file system hangs), ReadFile refuses at once. It is safe for concurrent
// use.
func ReadFile(path string) ([]byte, error) {
	if _, busy := reading.LoadOrStore(path, true); busy {
		return nil, fmt.Errorf("rules: %s: refused: an earlier read of it has not returned after %v (a hung file system?)", path, readTimeout)
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := read(path)
		reading.Delete(path) // before the answer: the caller may read again at once
		done <- result{data, err}
	}()
	t := time.NewTimer(readTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.data, r.err
	case <-t.C:
		return nil, fmt.Errorf("rules: %s: refused: not read within %v (a hung file system?)", path, readTimeout)
	}
}

// readRegular reads path when it is a regular file of at most
// maxFileSize bytes.
func readRegular(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if err := regular(path, fi); err != nil {
		return nil, err
	}
	// O_NONBLOCK: should path become a FIFO between Stat and Open, the
	// open does not wait for a writer; the Stat of the open file refuses it
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if err := regular(path, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("rules: read %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("rules: %s: refused: larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}

// regular refuses what is not a regular file of at most maxFileSize bytes.
func regular(path string, fi fs.FileInfo) error {
	m := fi.Mode()
	if !m.IsRegular() {
		return fmt.Errorf("rules: %s: refused: it is %s, not a regular file; write the rules to a regular file (atomically: write a temporary file, then rename it over this one)", path, fileKind(m))
	}
	if fi.Size() > maxFileSize {
		return fmt.Errorf("rules: %s: refused: %d bytes, larger than %d", path, fi.Size(), maxFileSize)
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (mode " + m.String() + ")"
}
