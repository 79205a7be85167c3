package natsapi

import "fmt"

// APIError is the error of a $SYS or JetStream API reply
// ({"code":..,"err_code":..,"description":..} in nats-server's ApiError).
type APIError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code"`
	Description string `json:"description"`
}

func (e *APIError) Error() string {
	if e.ErrCode != 0 {
		return fmt.Sprintf("%s (code %d, err_code %d)", e.Description, e.Code, e.ErrCode)
	}
	return fmt.Sprintf("%s (code %d)", e.Description, e.Code)
}
