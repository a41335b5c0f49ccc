package console_test

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// The product mounts the console under a path of its own server, behind
// its own authentication, and tells the console who acts.
func ExampleNew() {
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{})
	if err != nil {
		log.Fatal(err)
	}
	h, err := console.New(engine, console.Options{
		BasePath: "/ops/chronicle",
		Actions:  true,
		User: func(r *http.Request) (chronicle.User, error) {
			// The product's authentication has put the user on the request
			// (a header set by its proxy, here).
			login := r.Header.Get("X-Login")
			if login == "" {
				return chronicle.User{}, errors.New("not signed in")
			}
			return chronicle.User{ID: login, Roles: []string{"adjuster"}}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/chronicle/", requireLogin(h))

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/ops/chronicle/instances", nil)
	req.Header.Set("X-Login", "alice")
	mux.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))

	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ops/chronicle/instances", nil))
	fmt.Println(rec.Code)
	// Output:
	// 200 text/html; charset=utf-8
	// 401
}

// requireLogin stands for the product's authentication middleware.
func requireLogin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Login") == "" {
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
