package exampleapp

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"
	"time"

	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/rules"
)

// Reload triggers, as logged.
const (
	TriggerSIGHUP = "SIGHUP"
	TriggerWatch  = "file change"
	TriggerCall   = "call"
)

// MinWatch is the smallest -watch interval.
const MinWatch = 10 * time.Millisecond

// errNoRulesFile is the reload error of an app serving the embedded table.
var errNoRulesFile = errors.New("no -rules file: the embedded endpoint table cannot change; start with -rules <file> to reload rules")

// errNoServer is the reload error of a nil Server.
var errNoServer = errors.New("exampleapp: nil Server: pass the Live of the *serve.Server that serves App.Rules to StartReloads or ReloadRules")

// Server is what an App reloads its rules file into: the rules.Live of a
// *serve.Server of any adapter (serve.New, serve.NewNetHTTP; its Live
// method), serving [App.Rules] with [App.ServeConfig].
type Server interface {
	// Swap serves set (rules.Live.Swap).
	Swap(set *rules.Set) (rules.Change, error)
	// Generation counts the sets served (rules.Live.Generation).
	Generation() uint64
}

// reloadState is an App's part for reloading its rules file.
type reloadState struct {
	mu      sync.Mutex // serializes reloads
	file    string
	watch   time.Duration
	logger  *slog.Logger
	logSet  bool
	sum     [sha256.Size]byte                                // of the content last applied or rejected
	readErr string                                           // the last read error logged by the watcher
	notify  func(trigger string, ch rules.Change, err error) // tests: after each attempt
}

func checkWatch(cfg Config) error {
	switch {
	case cfg.Watch < 0 || cfg.Watch > 0 && cfg.Watch < MinWatch:
		return fmt.Errorf("-watch %v: want an interval of at least %v (e.g. -watch 2s), or leave it out to reload on SIGHUP only", cfg.Watch, MinWatch)
	case cfg.Watch > 0 && cfg.RulesFile == "":
		return errors.New("-watch needs -rules: the embedded endpoint table does not change; pass -rules <file>")
	}
	return nil
}

// readRules reads and parses a rules file as rules.LoadFile does (YAML,
// or JSON for a .json name; at most 4 MiB), and returns
// the content's hash.
func readRules(path string) (*rules.Set, [sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	data, err := readFile(path)
	if err != nil {
		return nil, sum, err
	}
	sum = sha256.Sum256(data)
	s, err := parseRules(path, data)
	return s, sum, err
}

// readFile reads the rules file as rules.LoadFile does: a regular file
// only, bounded in size and time; what it refuses is logged by the caller.
func readFile(path string) ([]byte, error) { return rules.ReadFile(path) }

func parseRules(path string, data []byte) (*rules.Set, error) {
	s, err := rules.Parse(data) // JSON or YAML, by its first byte
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func (a *App) logger() *slog.Logger {
	switch {
	case !a.reload.logSet:
		return slog.Default()
	case a.reload.logger == nil:
		return slog.New(slog.DiscardHandler)
	}
	return a.reload.logger
}

// ReloadRules reads the -rules file again and, if it validates, swaps it
// into srv (see [rules.Live] for what happens to each rule's state); a file that
// does not validate is rejected and the rules serving now keep serving.
// Either way the outcome is logged with slog: what changed, or every
// problem with its line. It returns the change, or why nothing changed.
func (a *App) ReloadRules(srv Server) (rules.Change, error) {
	ch, _, err := a.reloadFile(srv, TriggerCall, true)
	return ch, err
}

// reloadFile is ReloadRules for trigger; unless force, content equal to
// the last applied or rejected is skipped (attempted false).
func (a *App) reloadFile(srv Server, trigger string, force bool) (ch rules.Change, attempted bool, err error) {
	a.reload.mu.Lock()
	defer a.reload.mu.Unlock()
	log := a.logger()
	if v := reflect.ValueOf(srv); srv == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		log.Error("rules reload: no server to reload into", "trigger", trigger, "reason", errNoServer.Error())
		return rules.Change{}, true, errNoServer
	}
	if a.reload.file == "" {
		log.Warn("rules reload: nothing to reload", "trigger", trigger, "reason", errNoRulesFile.Error())
		return rules.Change{}, true, errNoRulesFile
	}
	data, err := readFile(a.reload.file)
	if err != nil {
		if force || err.Error() != a.reload.readErr {
			log.Error("rules reload failed: the previous rules keep serving", "file", a.reload.file, "trigger", trigger, "error", err.Error())
		}
		a.reload.readErr = err.Error()
		a.notify(trigger, rules.Change{}, err)
		return rules.Change{}, true, err
	}
	a.reload.readErr = ""
	sum := sha256.Sum256(data)
	if !force && sum == a.reload.sum {
		return rules.Change{}, false, nil
	}
	a.reload.sum = sum
	set, err := parseRules(a.reload.file, data)
	if err == nil {
		set, err = set.WithSignals(a.signals)
	}
	if err == nil {
		ch, err = srv.Swap(set)
	}
	if err != nil {
		log.Error("rules reload rejected: the previous rules keep serving", "file", a.reload.file, "trigger", trigger, "error", err.Error())
		a.notify(trigger, rules.Change{}, err)
		return rules.Change{}, true, err
	}
	msg := "rules reloaded"
	if len(ch.Added)+len(ch.Removed)+len(ch.LimitsChanged)+len(ch.Updated) == 0 {
		msg = "rules reloaded: no change"
	}
	log.Info(msg, "file", a.reload.file, "trigger", trigger, "generation", srv.Generation(), "changes", ch.String())
	for _, c := range ch.LimitsChanged {
		log.Info("rule limits changed", "rule", c.Name, "old", c.Old, "new", c.New, "state", a.stateNote())
	}
	a.notify(trigger, ch, nil)
	return ch, true, nil
}

func (a *App) notify(trigger string, ch rules.Change, err error) {
	if a.reload.notify != nil {
		a.reload.notify(trigger, ch, err)
	}
}

// stateNote says where a rule whose limits changed starts, on the app's
// store (see rules.Live).
func (a *App) stateNote() string {
	if _, ok := a.Store.(memstore.Store); ok {
		return "starts afresh: every key has its full quota under the new limits"
	}
	return "limits unchanged at their position keep their state; changed limits start afresh"
}

// StartReloads reloads the rules file into srv on SIGHUP and, with -watch, when
// its content changes (its SHA-256 is checked at each interval; a file
// that does not validate is logged once, until its content changes
// again). A reload that fails leaves the rules serving now in place;
// every outcome is logged (see [App.ReloadRules]). Without -rules a
// SIGHUP logs that there is nothing to reload. Write the file atomically
// (a rename), so that a check never reads it half written.
//
// stop ends the signal handling and the watcher and waits for them; it
// is idempotent.
func (a *App) StartReloads(srv Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				_, _, _ = a.reloadFile(srv, TriggerSIGHUP, true)
			}
		}
	}()
	if a.reload.watch > 0 && a.reload.file != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.watch(ctx, srv, a.reload.watch)
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sig)
			cancel()
			wg.Wait()
		})
	}
}

// watch polls the rules file every interval until ctx is done.
func (a *App) watch(ctx context.Context, srv Server, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.poll(srv)
		}
	}
}

// poll is one check of the watcher: reload when the file's content
// differs from what was last applied or rejected.
func (a *App) poll(srv Server) (attempted bool) {
	_, attempted, _ = a.reloadFile(srv, TriggerWatch, false)
	return attempted
}
