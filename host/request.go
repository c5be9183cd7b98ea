package host

import (
	"context"
	"fmt"
)

// Request is one HTTP request to drive through a plugin.
type Request struct {
	Headers  Headers // including :method, :path, :authority, :scheme
	Body     []byte
	Trailers Headers
	// Properties are the stream's own properties (xds.cluster_name, ...).
	Properties *Properties
}

// Response is an upstream response to drive through a plugin.
type Response struct {
	Headers  Headers // including :status
	Body     []byte
	Trailers Headers
}

// Result is what the plugin did with a request.
type Result struct {
	// Action is the request-headers phase's answer.
	Action Action
	// Request is the request as the plugin left it (to send upstream).
	Request Request
	// Local is the plugin's local response, if it sent one.
	Local *LocalResponse
	// Response is the response as the plugin left it (nil without upstream).
	Response *Response
}

// Upstream answers a request the plugin let through.
type Upstream func(ctx context.Context, req *Request) (*Response, error)

// Do runs one request through the VM as Envoy's HTTP filter chain would:
// request headers (end of stream when there is no body or trailers), body,
// trailers; then, if upstream is non-nil and the plugin sent no local
// response, the upstream's response through the response phases; then the
// end of the stream. A phase answering ActionPause waits for the plugin to
// resume (proxy_continue_stream) or to answer locally, bounded by ctx.
func (vm *VM) Do(ctx context.Context, req *Request, upstream Upstream) (*Result, error) {
	s, err := vm.NewStream(req.Properties)
	if err != nil {
		return nil, err
	}
	res, err := s.run(ctx, req, upstream)
	if cerr := s.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return res, err
}

func (s *Stream) run(ctx context.Context, req *Request, upstream Upstream) (*Result, error) {
	res := &Result{}
	noBody := len(req.Body) == 0 && len(req.Trailers) == 0
	a, err := s.step(ctx, func() (Action, error) { return s.RequestHeaders(req.Headers, noBody) })
	if err != nil {
		return nil, err
	}
	res.Action = a
	if len(req.Body) > 0 && s.LocalResponse() == nil {
		if _, err := s.step(ctx, func() (Action, error) { return s.RequestBody(req.Body, len(req.Trailers) == 0) }); err != nil {
			return nil, err
		}
	}
	if len(req.Trailers) > 0 && s.LocalResponse() == nil {
		if _, err := s.step(ctx, func() (Action, error) { return s.RequestTrailers(req.Trailers) }); err != nil {
			return nil, err
		}
	}
	s.vm.mu.Lock()
	res.Request = Request{Headers: s.reqHeaders.Clone(), Body: s.reqBody, Trailers: s.reqTrailers.Clone(), Properties: req.Properties}
	s.vm.mu.Unlock()
	if res.Local = s.LocalResponse(); res.Local != nil || upstream == nil {
		return res, nil
	}
	resp, err := upstream(ctx, &res.Request)
	if err != nil {
		return res, fmt.Errorf("upstream: %w", err)
	}
	return res, s.response(ctx, resp, res)
}

func (s *Stream) response(ctx context.Context, resp *Response, res *Result) error {
	noBody := len(resp.Body) == 0 && len(resp.Trailers) == 0
	if _, err := s.step(ctx, func() (Action, error) { return s.ResponseHeaders(resp.Headers, noBody) }); err != nil {
		return err
	}
	if len(resp.Body) > 0 {
		if _, err := s.step(ctx, func() (Action, error) { return s.ResponseBody(resp.Body, len(resp.Trailers) == 0) }); err != nil {
			return err
		}
	}
	if len(resp.Trailers) > 0 {
		if _, err := s.step(ctx, func() (Action, error) { return s.ResponseTrailers(resp.Trailers) }); err != nil {
			return err
		}
	}
	_, h := s.Headers()
	_, body := s.Bodies()
	res.Response = &Response{Headers: h, Body: body, Trailers: s.respTrailers.Clone()}
	res.Local = s.LocalResponse()
	return nil
}

// step runs one phase and waits while the plugin keeps it paused.
func (s *Stream) step(ctx context.Context, phase func() (Action, error)) (Action, error) {
	a, err := phase()
	if err != nil || a != ActionPause || s.LocalResponse() != nil {
		return a, err
	}
	return a, s.Wait(ctx)
}
