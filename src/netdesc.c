/* netdesc.c - placeholder: the model-description parser is being written. */
#include "shardsim/netdesc.h"

shs_status_t shs_netdesc_load(shs_netdesc_t **out, const char *path) {
    *out = NULL;
    return shs_set_error(SHS_UNSUPPORTED, "%s: model-description files are not supported yet", path);
}
shs_status_t shs_netdesc_parse(shs_netdesc_t **out, const char *text, const char *source) {
    *out = NULL;
    return shs_set_error(SHS_UNSUPPORTED, "%s: model-description files are not supported yet", source);
}
void shs_netdesc_free(shs_netdesc_t *nd) { (void)nd; }
shs_status_t shs_netdesc_layout_create(shs_layout_t *layout, const shs_netdesc_t *nd) {
    return shs_set_error(SHS_UNSUPPORTED, "model-description files are not supported yet");
}
shs_status_t shs_netdesc_model_create(shs_model_t **out, const shs_netdesc_t *nd, const shs_layout_t *layout,
                                      shs_device_t *dev, int B, int T) {
    *out = NULL;
    return shs_set_error(SHS_UNSUPPORTED, "model-description files are not supported yet");
}
