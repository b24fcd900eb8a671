// Command envoycheck checks Envoy configurations (YAML, as envoy -c takes
// them) against Envoy's own protos: each file read into a Bootstrap with
// protojson (an unknown field refused), every typed_config within
// unpacked, and every message checked by the rules its proto declares
// (go-control-plane's ValidateAll); then the rules Envoy keeps in C++
// alone that ratelab's files depend on (a local rate limit's
// fill_interval of 50ms at least). It runs where Envoy does not: make
// test builds it, in a module of its own, so that neither the project
// nor its other tools download go-control-plane.
//
//	envoycheck envoy.yaml...
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	bootstrap "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	localratelimit "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"gopkg.in/yaml.v3"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: envoycheck envoy.yaml...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Fprintf(os.Stderr, "envoycheck: %s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Printf("envoycheck: %s: as Envoy's protos have it\n", path)
	}
	if failed {
		os.Exit(1)
	}
}

func check(path string) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc any
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return err
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	var b bootstrap.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		return err
	}
	return validate(&b, "bootstrap")
}

// validate checks m by its proto's rules, and every message within it,
// a typed_config unpacked.
func validate(m proto.Message, where string) error {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	if l, ok := m.(*localratelimit.LocalRateLimit); ok {
		for i, d := range l.GetDescriptors() {
			if fi := d.GetTokenBucket().GetFillInterval().AsDuration(); d.GetTokenBucket().GetMaxTokens() > 0 && fi < 50*time.Millisecond {
				return fmt.Errorf("%s: descriptors[%d]: fill_interval %s: Envoy refuses one under 50ms", where, i, fi)
			}
		}
	}
	if a, ok := m.(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return validate(inner, where+" ("+a.GetTypeUrl()+")")
	}
	var err error
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		name := where + "." + string(fd.Name())
		switch {
		case fd.IsList():
			for i := range v.List().Len() {
				if err = validate(v.List().Get(i).Message().Interface(), fmt.Sprintf("%s[%d]", name, i)); err != nil {
					return false
				}
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					err = validate(mv.Message().Interface(), name+"["+k.String()+"]")
					return err == nil
				})
			}
		default:
			err = validate(v.Message().Interface(), name)
		}
		return err == nil
	})
	return err
}
