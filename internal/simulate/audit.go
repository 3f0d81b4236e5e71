package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
	"github.com/flashgate/flashgate/verifier"
)

// The lottery audit takes the public path only: the room view, the JWKS and
// the join receipts buyers were handed, as any buyer or third party could
// (docs/rooms.md#pre-queue-lottery).

// publicLottery is a room's lottery as anyone sees it: the public room view
// (GET /v1/rooms/{room}) and the issuer's JWKS.
type publicLottery struct {
	view issuer.RoomLottery
	keys *verifier.StaticKeys
}

// publicView reads the room view and the JWKS without the admin token; nil
// for a room without a lottery seed.
func (s *sim) publicView(ctx context.Context) (*publicLottery, error) {
	var rv server.RoomView
	if err := s.publicGet(ctx, "/v1/rooms/"+url.PathEscape(s.o.Room), &rv); err != nil {
		return nil, err
	}
	if rv.Lottery == nil {
		return nil, nil
	}
	var jwks json.RawMessage
	if err := s.publicGet(ctx, "/.well-known/jwks.json", &jwks); err != nil {
		return nil, err
	}
	keys, err := verifier.ParseJWKS(jwks)
	if err != nil {
		return nil, err
	}
	return &publicLottery{view: rv.RoomLottery(), keys: keys}, nil
}

// publicGet GETs path from the issuer, with no credentials, into v.
func (s *sim) publicGet(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.env.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d: %s", path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	return json.Unmarshal(raw, v)
}

// checkReceipts checks every buyer's join receipt against the public view
// (issuer.CheckReceipt) and returns how many were checked, refused, and
// missing (a pre-queue entry without one).
func (p *publicLottery) checkReceipts(buyers []*buyer) (checked, refused, missing int) {
	for _, b := range buyers {
		missing += b.noReceipt
		for _, rc := range b.receipts {
			checked++
			if _, err := issuer.CheckReceipt(context.Background(), rc, p.keys, p.view); err != nil {
				refused++
			}
		}
	}
	return checked, refused, missing
}
