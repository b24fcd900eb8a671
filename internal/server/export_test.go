package server

import "net/http"

// SetNext puts next behind the limit in place of the echo.
func (s *Server) SetNext(next http.Handler) { s.limited = s.mw.Wrap(next) }
