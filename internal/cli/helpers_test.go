package cli_test

import (
	"errors"
	"os"
	"strconv"
)

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

var osReadFile = os.ReadFile
