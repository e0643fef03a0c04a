//go:build unix

package rules

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core/memstore"
)

// TestReloadRefusesFIFO (issue 22, item 4): a rules path replaced by a
// FIFO used to block the reload forever, and every later one with it. It
// is refused at once, with an error that says what, and the next reload
// of a regular file applies.
func TestReloadRefusesFIFO(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(path, []byte("rules:\n  - {name: a, route: /a, limits: [\"1 per 1m\"]}\n"), 0o600))
	set, err := LoadFile(path)
	require.NoError(t, err)
	live, err := NewLive[struct{}](store, set, nil)
	require.NoError(t, err)

	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	for i := 0; i < 3; i++ { // every SIGHUP: refused, none blocks
		done := make(chan error, 1)
		go func() { _, err := live.ReloadFile(path); done <- err }()
		select {
		case err := <-done:
			assert.ErrorContains(t, err, "refused: it is a FIFO (named pipe), not a regular file")
		case <-time.After(maxReadTime):
			t.Fatal("the reload of a FIFO blocks")
		}
	}
	assert.Equal(t, uint64(1), live.Generation())

	require.NoError(t, os.Remove(path))
	require.NoError(t, os.WriteFile(path, []byte("rules:\n  - {name: b, route: /b, limits: [\"1 per 1m\"]}\n"), 0o600))
	ch, err := live.ReloadFile(path)
	require.NoError(t, err, "a later reload applies")
	assert.Equal(t, []string{"b"}, ch.Added)
}

// TestReadFileRefusesWhatIsNotARegularFile: directories, devices, files
// above maxFileSize, and a path whose earlier read has not returned.
func TestReadFileRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadFile(dir)
	assert.ErrorContains(t, err, "refused: it is a directory")
	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err := ReadFile("/dev/zero") // would never end
		assert.ErrorContains(t, err, "refused: it is a character device")
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxFileSize+1))
	require.NoError(t, f.Close())
	_, err = ReadFile(big)
	assert.ErrorContains(t, err, "larger than")

	small := filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(small, []byte("rules: []\n"), 0o600))
	reading.Store(small, true) // a read that hangs on a dead file system
	_, err = ReadFile(small)
	assert.ErrorContains(t, err, "an earlier read of it has not returned")
	reading.Delete(small)
	data, err := ReadFile(small)
	require.NoError(t, err)
	assert.Equal(t, "rules: []\n", string(data))
}

// TestReadFileTimesOut: a read that hangs (a dead network file system)
// fails after the bound, later reads are refused at once while it hangs,
// and work again once it returns.
func TestReadFileTimesOut(t *testing.T) {
	release := make(chan struct{})
	defer func(d time.Duration) { readTimeout, read = d, readRegular }(readTimeout)
	readTimeout = 20 * time.Millisecond
	read = func(string) ([]byte, error) { <-release; return []byte("late"), nil }
	_, err := ReadFile("/hung/rules.yaml")
	assert.ErrorContains(t, err, "not read within 20ms")
	_, err = ReadFile("/hung/rules.yaml")
	assert.ErrorContains(t, err, "an earlier read of it has not returned")
	close(release)
	require.Eventually(t, func() bool { _, err := ReadFile("/hung/rules.yaml"); return err == nil }, time.Second, time.Millisecond)
}
