package httplimit_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// memTable is a tiny database/sql driver over one table, customer →
// (per_minute, per_day): the query of docs/limit-sources.md's recipe
// reads a row by its one argument, an UPDATE sets per_minute.
type memTable struct {
	mu   sync.Mutex
	rows map[string][2]int64 // per_day 0: NULL
	down bool
}

func (m *memTable) Open(string) (driver.Conn, error) { return memConn{m}, nil }

type memConn struct{ t *memTable }

func (c memConn) Prepare(q string) (driver.Stmt, error) { return memStmt{c.t, q}, nil }
func (memConn) Close() error                            { return nil }
func (memConn) Begin() (driver.Tx, error)               { return nil, errors.New("no transactions") }

type memStmt struct {
	t *memTable
	q string
}

func (memStmt) Close() error  { return nil }
func (memStmt) NumInput() int { return -1 }

func (s memStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	id := args[1].(string)
	r := s.t.rows[id]
	r[0] = args[0].(int64)
	s.t.rows[id] = r
	return driver.RowsAffected(1), nil
}

func (s memStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	if s.t.down {
		return nil, errors.New("connection refused")
	}
	r, ok := s.t.rows[args[0].(string)]
	if !ok {
		return &memRows{}, nil
	}
	var day driver.Value
	if r[1] > 0 {
		day = r[1]
	}
	return &memRows{vals: [][]driver.Value{{r[0], day}}}, nil
}

type memRows struct{ vals [][]driver.Value }

func (*memRows) Columns() []string { return []string{"per_minute", "per_day"} }
func (*memRows) Close() error      { return nil }
func (r *memRows) Next(dest []driver.Value) error {
	if len(r.vals) == 0 {
		return io.EOF
	}
	copy(dest, r.vals[0])
	r.vals = r.vals[1:]
	return nil
}

// sqlSource is docs/limit-sources.md's recipe, as written there.
func sqlSource(db *sql.DB) core.LimitSource {
	return func(ctx context.Context, customer string) ([]core.Limit, bool, error) {
		var perMinute int64
		var perDay sql.NullInt64
		err := db.QueryRowContext(ctx,
			`SELECT per_minute, per_day FROM customer_limits WHERE customer = $1`, customer).Scan(&perMinute, &perDay)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil // not in the table: the rule's own limits
		}
		if err != nil {
			return nil, false, err // the database failed: the fallback
		}
		limits := []core.Limit{core.PerMinute(perMinute)}
		if perDay.Valid {
			limits = append(limits, core.PerDay(perDay.Int64))
		}
		return limits, true, nil
	}
}

var registerMemTable sync.Once

func TestSQLRecipe(t *testing.T) {
	tbl := &memTable{rows: map[string][2]int64{"acme": {3, 0}, "initech": {50, 4}}}
	registerMemTable.Do(func() { sql.Register("limitkit-memtable", memDriverHolder{}) })
	memDriver.Lock()
	memDriver.t = tbl
	memDriver.Unlock()
	db, err := sql.Open("limitkit-memtable", "")
	require.NoError(t, err)
	defer db.Close()

	store := memstore.MustNew()
	defer store.Close()
	limiter := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(2)}})
	customers, err := core.NewSourced(limiter, sqlSource(db), core.SourceConfig{Timeout: time.Hour}) // no lookup times out on a loaded host
	require.NoError(t, err)
	key, _ := keyfuncs.Header("X-Customer-ID")
	h := nethttp.New(limiter, httplimit.WithKey(key), httplimit.WithLimitSource(customers))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	quota := func(who string) (n int) {
		for n < 100 && get(h, "", "X-Customer-ID", who).Code == 200 {
			n++
		}
		return n
	}
	assert.Equal(t, 3, quota("acme"))
	assert.Equal(t, 4, quota("initech"), "the daily limit binds")
	assert.Equal(t, 2, quota("globex"), "no row: the rule's limits")

	_, err = db.ExecContext(context.Background(), `UPDATE customer_limits SET per_minute = $1 WHERE customer = $2`, int64(8), "acme")
	require.NoError(t, err)
	assert.Equal(t, 0, quota("acme"), "cached: the old limit until the TTL or Invalidate")
	customers.Invalidate("acme")
	assert.Equal(t, 5, quota("acme"), "after Invalidate, the new row: 8 a minute, of which the 3 used carry over")

	tbl.mu.Lock()
	tbl.down = true
	tbl.mu.Unlock()
	assert.Equal(t, 2, quota("hooli"), "the database down: the rule's own limits")
}

// memDriverHolder lets one registered driver serve each test's table.
type memDriverHolder struct{}

var memDriver struct {
	sync.Mutex
	t *memTable
}

func (memDriverHolder) Open(name string) (driver.Conn, error) {
	memDriver.Lock()
	defer memDriver.Unlock()
	return memDriver.t.Open(name)
}
