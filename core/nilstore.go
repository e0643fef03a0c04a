package core

import (
	"fmt"
	"reflect"
)

// checkNilStore reports a store that is a nil pointer (or nil map, chan,
// func or slice) wrapped in a non-nil interface: the typed nil a caller
// gets by ignoring a constructor's error (s, _ := redisstore.New(...)),
// whose methods would panic on the first request. It uses reflect, and
// runs only at construction, never on the request path.
func checkNilStore(fn string, store Store) error {
	v := reflect.ValueOf(store)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Slice, reflect.Interface:
		if v.IsNil() {
			return fmt.Errorf("core: %s: the store is a nil %T (was the error from its constructor ignored?); check the error of the store's constructor (memstore.New, redisstore.New, fleet.New) and pass the store it returns", fn, store)
		}
	}
	return nil
}
